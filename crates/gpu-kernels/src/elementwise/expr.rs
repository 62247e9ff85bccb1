//! The expression language of [`super::Elementwise`]: parsed once into a
//! tree, printed as CUDA C, and compiled into a program that the host
//! backend runs over blocks of elements.
//!
//! ```text
//! body      := statement (';' statement)* ';'?
//! statement := name '=' expr
//! expr      := or ('?' expr ':' expr)?
//! or        := and ('||' and)*
//! and       := cmp ('&&' cmp)*
//! cmp       := sum (('==' | '!=' | '<' | '<=' | '>' | '>=') sum)?
//! sum       := product (('+' | '-') product)*
//! product   := unary (('*' | '/') unary)*
//! unary     := ('-' | '!') unary | primary
//! primary   := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```

/// A function of the language (in a private module: not part of the
/// public API, though [`super::Real`]'s hidden methods name it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Exp,
    Log,
    Sqrt,
    Abs,
    Sin,
    Cos,
    Tanh,
    Floor,
    Ceil,
    Pow,
    Min,
    Max,
    Fma,
}

impl Func {
    /// Every function, with its name in expressions and its arity.
    pub(super) const ALL: [(Func, &'static str, usize); 13] = [
        (Func::Exp, "exp", 1),
        (Func::Log, "log", 1),
        (Func::Sqrt, "sqrt", 1),
        (Func::Abs, "abs", 1),
        (Func::Sin, "sin", 1),
        (Func::Cos, "cos", 1),
        (Func::Tanh, "tanh", 1),
        (Func::Floor, "floor", 1),
        (Func::Ceil, "ceil", 1),
        (Func::Pow, "pow", 2),
        (Func::Min, "min", 2),
        (Func::Max, "max", 2),
        (Func::Fma, "fma", 3),
    ];

    /// The CUDA C function of the double version (`sqrt`, `fmin`, ...);
    /// the float version adds `f`.
    pub(super) fn c_name(self) -> &'static str {
        match self {
            Func::Exp => "exp",
            Func::Log => "log",
            Func::Sqrt => "sqrt",
            Func::Abs => "fabs",
            Func::Sin => "sin",
            Func::Cos => "cos",
            Func::Tanh => "tanh",
            Func::Floor => "floor",
            Func::Ceil => "ceil",
            Func::Pow => "pow",
            Func::Min => "fmin",
            Func::Max => "fmax",
            Func::Fma => "fma",
        }
    }

    /// Whether CUDA and the host round it the same (IEEE's exactly
    /// rounded operations, or none at all).
    pub(super) fn exact(self) -> bool {
        matches!(
            self,
            Func::Sqrt | Func::Abs | Func::Floor | Func::Ceil | Func::Min | Func::Max | Func::Fma
        )
    }
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

/// Where a name's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Var {
    /// The `k`-th input's element.
    Input(usize),
    /// The `k`-th scalar.
    Scalar(usize),
    /// The `k`-th output's element (its value before the kernel, or the
    /// last one assigned to it).
    Output(usize),
    /// The `k`-th local (a name first assigned in the body).
    Local(usize),
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Expr {
    Num(f64),
    Var(Var),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Bin(Bin, Box<Expr>, Box<Expr>),
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
}

/// `target = value`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Statement {
    pub(super) target: Var,
    pub(super) value: Expr,
}

/// A parsed body: its statements and its locals' names.
#[derive(Clone, Debug)]
pub(super) struct Body {
    pub(super) statements: Vec<Statement>,
    pub(super) locals: Vec<String>,
    /// Whether output `k`'s old value is read (before its first
    /// assignment).
    pub(super) reads_output: Vec<bool>,
}

/// The names a body may use.
pub(super) struct Names<'a> {
    pub(super) inputs: &'a [String],
    pub(super) scalars: &'a [String],
    pub(super) outputs: &'a [String],
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Sym(&'static str),
}

const SYMBOLS: [&str; 20] = [
    "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "+", "-", "*", "/", "(", ")", ",", ";", "=",
    "?", ":",
];

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    'next: while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text = &src[start..i];
            let v = text
                .parse::<f64>()
                .map_err(|_| format!("`{text}` (at {start}) is not a number"))?;
            out.push((Tok::Num(v), start));
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Name(src[start..i].to_owned()), start));
            continue;
        }
        for s in SYMBOLS {
            if src[i..].starts_with(s) {
                out.push((Tok::Sym(s), i));
                i += s.len();
                continue 'next;
            }
        }
        let ch = src[i..].chars().next().unwrap_or('?');
        return Err(format!("unexpected `{ch}` at {i}"));
    }
    Ok(out)
}

/// Whether `name` may name an input, a scalar, an output or a local: an
/// identifier that is neither a function of the language nor a word CUDA C
/// reserves in the generated kernel.
pub(super) fn check_name(name: &str) -> Result<(), String> {
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(format!("`{name}` is not a name (letters, digits, `_`)"));
    }
    if name.starts_with("gk_") || name.starts_with("__") {
        return Err(format!(
            "`{name}`: names starting `gk_` or `__` are the kernel's own"
        ));
    }
    // C++'s keywords (NVRTC compiles C++), CUDA's built-in variables, and
    // the math functions the kernel calls: a name that the host would take
    // but NVRTC would not, or that would hide a function the kernel calls.
    const RESERVED: &[&str] = &[
        "alignas",
        "alignof",
        "asm",
        "auto",
        "bool",
        "break",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "constexpr",
        "continue",
        "decltype",
        "default",
        "delete",
        "do",
        "double",
        "else",
        "enum",
        "explicit",
        "extern",
        "false",
        "float",
        "for",
        "friend",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "mutable",
        "namespace",
        "new",
        "noexcept",
        "nullptr",
        "operator",
        "private",
        "protected",
        "public",
        "register",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "template",
        "this",
        "throw",
        "true",
        "try",
        "typedef",
        "typeid",
        "typename",
        "union",
        "unsigned",
        "using",
        "virtual",
        "void",
        "volatile",
        "while",
        "threadIdx",
        "blockIdx",
        "blockDim",
        "gridDim",
        "warpSize",
    ];
    let function = Func::ALL.iter().any(|&(f, n, _)| {
        let c = f.c_name();
        n == name || c == name || name.strip_suffix('f') == Some(c)
    });
    if RESERVED.contains(&name) || function {
        return Err(format!("`{name}` is reserved"));
    }
    Ok(())
}

/// How many tokens a body may have: every tree made of them is then
/// shallow enough for the recursive passes over it (printing, compiling
/// for the host, dropping) on any thread's stack.
const MAX_TOKENS: usize = 2048;

/// How deep expressions may nest (parentheses, operators of one level
/// chained to the right, calls): far beyond what anyone writes, and well
/// within the parser's stack.
const MAX_DEPTH: usize = 200;

struct Parser<'n> {
    toks: Vec<(Tok, usize)>,
    at: usize,
    depth: usize,
    names: &'n Names<'n>,
    locals: Vec<String>,
    /// Outputs assigned so far.
    assigned: Vec<bool>,
    reads_output: Vec<bool>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(t, _)| t)
    }

    fn where_(&self) -> String {
        match self.toks.get(self.at) {
            Some((_, p)) => format!("at {p}"),
            None => "at the end".to_owned(),
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(t)) if *t == s) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), String> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(format!("expected `{s}` {}", self.where_()))
        }
    }

    fn body(&mut self) -> Result<Vec<Statement>, String> {
        let mut out = Vec::new();
        while self.peek().is_some() {
            if self.eat(";") {
                continue;
            }
            out.push(self.statement()?);
            if self.peek().is_some() {
                self.expect(";")?;
            }
        }
        Ok(out)
    }

    fn statement(&mut self) -> Result<Statement, String> {
        let name = match self.peek() {
            Some(Tok::Name(n)) => n.clone(),
            _ => return Err(format!("expected `name = expression` {}", self.where_())),
        };
        self.at += 1;
        self.expect("=")?;
        let value = self.expr()?;
        let target = if let Some(k) = self.names.outputs.iter().position(|o| *o == name) {
            self.assigned[k] = true;
            Var::Output(k)
        } else if self.names.inputs.contains(&name) || self.names.scalars.contains(&name) {
            return Err(format!(
                "`{name}` is an input or a scalar: it cannot be assigned"
            ));
        } else if let Some(k) = self.locals.iter().position(|l| *l == name) {
            Var::Local(k)
        } else {
            check_name(&name)?;
            self.locals.push(name);
            Var::Local(self.locals.len() - 1)
        };
        Ok(Statement { target, value })
    }

    fn expr(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "the expression nests deeper than {MAX_DEPTH} {}",
                self.where_()
            ));
        }
        let e = self.select();
        self.depth -= 1;
        e
    }

    fn select(&mut self) -> Result<Expr, String> {
        let c = self.or()?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Ok(Expr::Select(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    fn chain(
        &mut self,
        ops: &[(&str, Bin)],
        next: fn(&mut Self) -> Result<Expr, String>,
        repeat: bool,
    ) -> Result<Expr, String> {
        let mut e = next(self)?;
        'more: loop {
            for &(s, op) in ops {
                if self.eat(s) {
                    e = Expr::Bin(op, Box::new(e), Box::new(next(self)?));
                    if repeat {
                        continue 'more;
                    }
                    return Ok(e);
                }
            }
            return Ok(e);
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.chain(&[("||", Bin::Or)], Self::and, true)
    }

    fn and(&mut self) -> Result<Expr, String> {
        self.chain(&[("&&", Bin::And)], Self::cmp, true)
    }

    fn cmp(&mut self) -> Result<Expr, String> {
        let ops = [
            ("==", Bin::Eq),
            ("!=", Bin::Ne),
            ("<=", Bin::Le),
            (">=", Bin::Ge),
            ("<", Bin::Lt),
            (">", Bin::Gt),
        ];
        self.chain(&ops, Self::sum, false)
    }

    fn sum(&mut self) -> Result<Expr, String> {
        self.chain(&[("+", Bin::Add), ("-", Bin::Sub)], Self::product, true)
    }

    fn product(&mut self) -> Result<Expr, String> {
        self.chain(&[("*", Bin::Mul), ("/", Bin::Div)], Self::unary, true)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        let mut signs = Vec::new();
        while let Some(s) = ["-", "!"].into_iter().find(|s| self.eat(s)) {
            signs.push(s);
        }
        if signs.len() > MAX_DEPTH {
            return Err(format!("more than {MAX_DEPTH} signs {}", self.where_()));
        }
        let mut e = self.primary()?;
        for s in signs.into_iter().rev() {
            e = if s == "-" {
                Expr::Neg(Box::new(e))
            } else {
                Expr::Not(Box::new(e))
            };
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let tok = self.toks.get(self.at).cloned();
        match tok {
            Some((Tok::Num(v), _)) => {
                self.at += 1;
                Ok(Expr::Num(v))
            }
            Some((Tok::Sym("("), _)) => {
                self.at += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Some((Tok::Name(name), pos)) => {
                self.at += 1;
                if self.eat("(") {
                    let Some(&(f, _, arity)) = Func::ALL.iter().find(|(_, n, _)| *n == name) else {
                        return Err(format!("`{name}` (at {pos}) is not a function"));
                    };
                    let mut args = vec![self.expr()?];
                    while self.eat(",") {
                        args.push(self.expr()?);
                    }
                    self.expect(")")?;
                    if args.len() != arity {
                        return Err(format!(
                            "`{name}` takes {arity} argument(s), given {}",
                            args.len()
                        ));
                    }
                    return Ok(Expr::Call(f, args));
                }
                self.var(&name, pos).map(Expr::Var)
            }
            _ => Err(format!(
                "expected a number, a name or `(` {}",
                self.where_()
            )),
        }
    }

    fn var(&mut self, name: &str, pos: usize) -> Result<Var, String> {
        let n = self.names;
        if let Some(k) = n.inputs.iter().position(|x| x == name) {
            return Ok(Var::Input(k));
        }
        if let Some(k) = n.scalars.iter().position(|x| x == name) {
            return Ok(Var::Scalar(k));
        }
        if let Some(k) = n.outputs.iter().position(|x| x == name) {
            if !self.assigned[k] {
                self.reads_output[k] = true;
            }
            return Ok(Var::Output(k));
        }
        if let Some(k) = self.locals.iter().position(|x| x == name) {
            return Ok(Var::Local(k));
        }
        Err(format!(
            "`{name}` (at {pos}) is not an input, a scalar, an output or a local assigned before"
        ))
    }
}

/// Parses `src` over `names`: every output assigned at least once.
pub(super) fn parse(src: &str, names: &Names<'_>) -> Result<Body, String> {
    let toks = lex(src)?;
    if toks.len() > MAX_TOKENS {
        return Err(format!(
            "the body has {} tokens; at most {MAX_TOKENS}",
            toks.len()
        ));
    }
    let mut p = Parser {
        toks,
        at: 0,
        depth: 0,
        names,
        locals: Vec::new(),
        assigned: vec![false; names.outputs.len()],
        reads_output: vec![false; names.outputs.len()],
    };
    let statements = p.body()?;
    if statements.is_empty() {
        return Err("the body assigns nothing".to_owned());
    }
    if let Some(k) = p.assigned.iter().position(|a| !a) {
        return Err(format!(
            "the output `{}` is never assigned",
            names.outputs[k]
        ));
    }
    Ok(Body {
        statements,
        locals: p.locals,
        reads_output: p.reads_output,
    })
}

/// Whether every function `e` calls rounds as the host does.
pub(super) fn exact(e: &Expr) -> bool {
    match e {
        Expr::Num(_) | Expr::Var(_) => true,
        Expr::Neg(a) | Expr::Not(a) => exact(a),
        Expr::Bin(_, a, b) => exact(a) && exact(b),
        Expr::Select(c, a, b) => exact(c) && exact(a) && exact(b),
        Expr::Call(f, args) => f.exact() && args.iter().all(exact),
    }
}
