//! Timelines: when tracing is on, every tracked operation (kernel launches,
//! copies, fills, library calls such as `cublasSgemm_v2`, collectives) and
//! every graph launch (a graphed scope's, as `graph(<n> nodes)`, and
//! [`crate::TaskContext::launch_graph`]'s, as `graph`) is bracketed by two
//! timing events on its stream; once they complete, each becomes a span
//! (stream, name, start, duration) relative to a common origin. Spans can be
//! written as a Chrome trace (open it in Perfetto) or drawn as an SVG with
//! one lane per stream. A graph's nodes get no spans of their own: its
//! launch is one span.
//!
//! Off by default: the hot path pays one relaxed load. `GPU_TRACE=path.json`
//! switches it on for the global runtime ([`crate::Runtime::trace_to_file`]
//! for any runtime) and writes completed spans to that file at the end of
//! each top-level scope, at [`crate::Runtime::trace_flush`] and at
//! [`crate::Runtime::trace_stop`]. The file is a complete JSON array after
//! each of these (its closing bracket is written back after the new spans),
//! so it parses whenever the program exits normally; a span whose work had
//! not completed at the last of them is not in it (call `trace_stop`, which
//! waits for the traced work, to have every one).

use crate::driver::{Driver, RawEvent, RawStream};
use crate::error::Result;
use gpu_epoch::StreamId;
use parking_lot::Mutex;
use std::io::{Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// One operation on the timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// The stream it ran on.
    pub stream: StreamId,
    /// What it was (a kernel's name, `htod`, `dtoh`, a library call's such
    /// as `cublasSgemm_v2`, a graph launch's `graph(<n> nodes)`, ...).
    pub name: &'static str,
    /// Start, microseconds since tracing began.
    pub start_us: f64,
    /// Duration, microseconds.
    pub dur_us: f64,
}

struct Pending {
    stream: StreamId,
    name: &'static str,
    start: RawEvent,
    end: RawEvent,
}

#[derive(Default)]
struct TraceState {
    origin: Option<RawEvent>,
    pending: Vec<Pending>,
    done: Vec<Span>,
    spare: Vec<RawEvent>,
    file: Option<TraceFile>,
}

/// The trace file: always a complete JSON array, `[`, the events separated
/// by `,` and `\n]\n`; new events are written over that closing bracket,
/// which is written again after them.
struct TraceFile {
    f: std::fs::File,
    /// Where the closing `\n]\n` begins.
    end: u64,
    /// Whether an event was written (the next one needs a separator).
    any: bool,
}

impl TraceFile {
    fn new(mut f: std::fs::File) -> std::io::Result<Self> {
        f.write_all(b"[\n]\n")?;
        Ok(TraceFile {
            f,
            end: 1,
            any: false,
        })
    }

    /// Writes `spans` before the closing bracket, in one write.
    fn append(&mut self, spans: &[Span]) -> std::io::Result<()> {
        if spans.is_empty() {
            return Ok(());
        }
        let mut body = String::new();
        for s in spans {
            body.push_str(if self.any { ",\n" } else { "\n" });
            body.push_str(&s.chrome_json());
            self.any = true;
        }
        let len = body.len() as u64;
        body.push_str("\n]\n");
        self.f.seek(SeekFrom::Start(self.end))?;
        self.f.write_all(body.as_bytes())?;
        self.end += len;
        Ok(())
    }
}

/// The tracer of one runtime.
#[derive(Default)]
pub(crate) struct Tracer {
    on: AtomicBool,
    state: Mutex<TraceState>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("on", &self.on.load(Ordering::Relaxed))
            .finish()
    }
}

impl Tracer {
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn timing_event(d: &dyn Driver, st: &mut TraceState) -> Result<RawEvent> {
        match st.spare.pop() {
            Some(e) => Ok(e),
            None => d.create_event(true),
        }
    }

    /// Starts tracing (see [`Span`]): the origin is now, on `origin_stream`.
    pub(crate) fn start(&self, d: &dyn Driver, origin_stream: RawStream) -> Result<()> {
        let mut st = self.state.lock();
        if st.origin.is_none() {
            let o = Self::timing_event(d, &mut st)?;
            d.record(o, origin_stream)?;
            // Until it has happened, work on other streams could start
            // before the origin and get a negative start.
            d.event_sync(o)?;
            st.origin = Some(o);
        }
        self.on.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// From now on, completed spans are written to `f` (Chrome trace JSON
    /// array format), a complete JSON array after each [`Tracer::flush`].
    pub(crate) fn set_file(&self, f: std::fs::File) -> std::io::Result<()> {
        self.state.lock().file = Some(TraceFile::new(f)?);
        Ok(())
    }

    /// Brackets one operation on `raw` when tracing: returns the start event.
    #[inline]
    pub(crate) fn open(&self, d: &dyn Driver, raw: RawStream) -> Option<RawEvent> {
        if !self.on() {
            return None;
        }
        let e = Self::timing_event(d, &mut self.state.lock()).ok()?;
        d.record(e, raw).ok()?;
        Some(e)
    }

    /// Ends the bracket [`Tracer::open`] began: a pending span.
    #[inline]
    pub(crate) fn close(
        &self,
        d: &dyn Driver,
        start: Option<RawEvent>,
        stream: StreamId,
        raw: RawStream,
        name: &'static str,
    ) {
        let Some(start) = start else { return };
        let Ok(end) = Self::timing_event(d, &mut self.state.lock()) else {
            return;
        };
        if d.record(end, raw).is_ok() {
            self.state.lock().pending.push(Pending {
                stream,
                name,
                start,
                end,
            });
        }
    }

    /// Turns pending spans whose events completed into spans (and appends
    /// them to the trace file, if any). Never blocks.
    pub(crate) fn flush(&self, d: &dyn Driver) {
        if !self.on() {
            return;
        }
        let mut st = self.state.lock();
        let Some(origin) = st.origin else { return };
        let mut new = Vec::new();
        for p in std::mem::take(&mut st.pending) {
            if !matches!(d.event_query(p.end), Ok(true)) {
                st.pending.push(p);
                continue;
            }
            if let (Ok(a), Ok(dur)) = (
                d.event_elapsed_ms(origin, p.start),
                d.event_elapsed_ms(p.start, p.end),
            ) {
                new.push(Span {
                    stream: p.stream,
                    name: p.name,
                    start_us: a as f64 * 1e3,
                    dur_us: dur as f64 * 1e3,
                });
            }
            st.spare.extend([p.start, p.end]);
        }
        if let Some(f) = st.file.as_mut() {
            let _ = f.append(&new);
        }
        st.done.extend(new);
    }

    /// Stops tracing (the caller waited for the traced work) and returns
    /// every span since [`Tracer::start`], by start time.
    pub(crate) fn stop(&self, d: &dyn Driver) -> Vec<Span> {
        self.flush(d);
        self.on.store(false, Ordering::Relaxed);
        let mut st = self.state.lock();
        if let Some(o) = st.origin.take() {
            st.spare.push(o);
        }
        if let Some(f) = st.file.as_mut() {
            let _ = f.f.flush();
        }
        let mut spans = std::mem::take(&mut st.done);
        spans.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        spans
    }
}

impl Span {
    /// One Chrome trace event ("X": a complete span; `tid` is the stream).
    fn chrome_json(&self) -> String {
        format!(
            "{{\"name\": \"{}\", \"ph\": \"X\", \"ts\": {:.3}, \"dur\": {:.3}, \"pid\": 1, \"tid\": {}}}",
            json_escape(self.name),
            self.start_us,
            self.dur_us,
            self.stream.index()
        )
    }
}

/// `s` inside a JSON string's quotes.
fn json_escape(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
        return s.into();
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if c.is_control() => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.into()
}

/// The name of a graph launch's span: `graph(<n> nodes)`. Names are
/// `&'static str`: each node count's is made once and kept (up to
/// `MAX_GRAPH_NAMES` of them, then plain `graph`).
pub(crate) fn graph_name(nodes: usize) -> &'static str {
    const MAX_GRAPH_NAMES: usize = 1024;
    static NAMES: Mutex<Vec<(usize, &'static str)>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock();
    if let Some(&(_, s)) = names.iter().find(|(n, _)| *n == nodes) {
        return s;
    }
    if names.len() >= MAX_GRAPH_NAMES {
        return "graph";
    }
    let s: &'static str = Box::leak(format!("graph({nodes} nodes)").into_boxed_str());
    names.push((nodes, s));
    s
}

/// The spans as a Chrome trace (JSON array format; open it in Perfetto).
pub fn chrome_trace(spans: &[Span]) -> String {
    let events: Vec<String> = spans.iter().map(Span::chrome_json).collect();
    format!("[\n{}\n]\n", events.join(",\n"))
}

/// The spans drawn as an SVG timeline: one lane per stream, time across.
pub fn svg_timeline(title: &str, spans: &[Span]) -> String {
    let mut lanes: Vec<StreamId> = spans.iter().map(|s| s.stream).collect();
    lanes.sort();
    lanes.dedup();
    let t0 = spans
        .iter()
        .map(|s| s.start_us)
        .fold(f64::INFINITY, f64::min);
    let t1 = spans
        .iter()
        .map(|s| s.start_us + s.dur_us)
        .fold(f64::NEG_INFINITY, f64::max);
    let (w, lane_h, left, top) = (900.0, 26.0, 70.0, 34.0);
    let span = (t1 - t0).max(1e-3);
    let x = |t: f64| left + (t - t0) / span * (w - left - 10.0);
    let h = top + lane_h * lanes.len() as f64 + 30.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"monospace\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"18\" font-size=\"13\">{title}</text>\n"
    );
    let palette = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
    ];
    for (i, l) in lanes.iter().enumerate() {
        let y = top + lane_h * i as f64;
        s.push_str(&format!(
            "<text x=\"8\" y=\"{:.1}\">stream {}</text>\n<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\n",
            y + lane_h * 0.65,
            l.index(),
            w - 10.0,
            y + lane_h,
            y + lane_h
        ));
    }
    let mut names: Vec<&str> = spans.iter().map(|s| s.name).collect();
    names.sort();
    names.dedup();
    for sp in spans {
        let lane = lanes.iter().position(|l| *l == sp.stream).unwrap_or(0);
        let y = top + lane_h * lane as f64 + 3.0;
        let color = palette[names.iter().position(|n| *n == sp.name).unwrap_or(0) % palette.len()];
        let (x0, x1) = (x(sp.start_us), x(sp.start_us + sp.dur_us));
        s.push_str(&format!(
            "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\"><title>{} {:.1} us</title></rect>\n",
            (x1 - x0).max(1.0),
            lane_h - 6.0,
            sp.name,
            sp.dur_us
        ));
    }
    let ybase = top + lane_h * lanes.len() as f64 + 18.0;
    s.push_str(&format!(
        "<text x=\"{left}\" y=\"{ybase:.1}\">0</text>\n<text x=\"{:.1}\" y=\"{ybase:.1}\" text-anchor=\"end\">{:.1} ms</text>\n",
        w - 10.0,
        span / 1e3
    ));
    let mut lx = left + 60.0;
    for (i, n) in names.iter().enumerate() {
        s.push_str(&format!(
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{n}</text>\n",
            ybase - 9.0,
            palette[i % palette.len()],
            lx + 14.0,
            ybase
        ));
        lx += 14.0 + 8.0 * n.len() as f64 + 16.0;
    }
    s.push_str("</svg>\n");
    s
}
