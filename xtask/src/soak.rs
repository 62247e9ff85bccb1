//! `cargo xtask soak --minutes N`: random scopes from the stress generator
//! in a loop for N minutes (the test kit's binary `soak`, release, the global
//! runtime), printing the runtime's live resources once a minute and at
//! the end; fails if anything leaked between the first and the last report
//! (see the example for what counts), a value was wrong or a race found.

use crate::Error;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    let mut forward = Vec::new();
    let mut minutes = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--minutes" | "--every" | "--seed" => {
                let v = it
                    .next()
                    .ok_or_else(|| Error::Usage(format!("{a} needs a value")))?;
                if !v.parse::<f64>().is_ok_and(|x| x > 0.0 || a == "--seed") {
                    return Err(Error::Usage(format!("{a}: `{v}` is not a positive number")));
                }
                minutes |= a == "--minutes";
                forward.extend([a.clone(), v.clone()]);
            }
            other => return Err(Error::Usage(format!("unknown argument `{other}`"))),
        }
    }
    if !minutes {
        return Err(Error::Usage("soak needs --minutes N".into()));
    }
    crate::stress::run_testkit_bin("soak", &forward)
}
