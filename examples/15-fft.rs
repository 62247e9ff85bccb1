//! # 15: fast Fourier transforms (`gpu::fft`)
//!
//! Two transforms, each in a task of its own (sibling tasks, so their
//! streams overlap on the device), both checked against a direct DFT
//! computed on the host (`X[k] = sum_j x[j] e^(-2 pi i j k / n)`, in `f64`):
//!
//! - a batch of real signals (`f64`), forward real to complex (the half
//!   spectrum, `n / 2 + 1` numbers a signal), then back, complex to real;
//! - a 2D complex field (`f32`), transformed in place, then back out of
//!   place.
//!
//! No transform is normalized (as in cuFFT and FFTW): forward then inverse
//! gives `N x` for `N` points, so the round trips are checked against
//! `N x`. cuFFT runs on the CUDA backend, `rustfft` on the host backend;
//! a `Plan` is only a shape (cuFFT's plans are cached by the runtime).
//! Exits non-zero if a check fails.
//!
//! ```text
//! cargo run --release -p gpu-examples --example 15-fft
//! ```

use gpu::fft::{Complex32, Complex64, Plan};
use gpu::prelude::*;
use gpu::BackendKind;
use std::f64::consts::PI;

/// `e^(-2 pi i j k / n)`, with `j k` reduced mod `n` first (exact angles).
fn twiddle(j: usize, k: usize, n: usize) -> Complex64 {
    let a = -2.0 * PI * ((j * k) % n) as f64 / n as f64;
    Complex64::new(a.cos(), a.sin())
}

/// The DFT of `x` (`n` points, stride `stride` from `x[0]`), directly.
fn dft(x: &[Complex64], n: usize, stride: usize) -> Vec<Complex64> {
    (0..n)
        .map(|k| (0..n).map(|j| x[j * stride] * twiddle(j, k, n)).sum())
        .collect()
}

/// The 2D DFT of a row-major `rows x cols` field, directly: each row's,
/// then each column's (the 2D transform separates).
fn dft_2d(x: &[Complex64], rows: usize, cols: usize) -> Vec<Complex64> {
    let mut by_rows = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        by_rows.extend(dft(&x[r * cols..], cols, 1));
    }
    let mut out = vec![Complex64::default(); rows * cols];
    for c in 0..cols {
        for (r, v) in dft(&by_rows[c..], rows, cols).into_iter().enumerate() {
            out[r * cols + c] = v;
        }
    }
    out
}

/// The largest `|got - want|`, relative to the largest `|want|`.
fn difference<'a>(
    got: impl IntoIterator<Item = Complex64>,
    want: impl IntoIterator<Item = &'a Complex64>,
) -> f64 {
    let (mut d, mut scale) = (0.0f64, 0.0f64);
    for (g, w) in got.into_iter().zip(want) {
        d = d.max((g - w).norm());
        scale = scale.max(w.norm());
    }
    d / scale.max(f64::MIN_POSITIVE)
}

/// What the real transforms gave: the half spectra and the round trip.
struct RealResult {
    spectrum: Vec<Complex64>,
    back: Vec<f64>,
}

/// What the 2D transforms gave: the spectrum and the round trip.
struct FieldResult {
    spectrum: Vec<Complex32>,
    back: Vec<Complex32>,
}

/// `batch` real signals of `n` points: forward real, then inverse real.
fn real_transforms(t: &TaskContext, signals: &[f64], n: usize, batch: usize) -> Result<RealResult> {
    let plan = Plan::new(&[n]).batch(batch);
    let x = t.from_host(signals)?;
    let mut spectrum = t.zeros::<Complex64>((n / 2 + 1) * batch)?;
    let mut back = t.zeros::<f64>(n * batch)?;
    plan.forward_real(t, &x, &mut spectrum)?;
    plan.inverse_real(t, &spectrum, &mut back)?; // keeps `spectrum`
    Ok(RealResult {
        spectrum: t.to_vec(&spectrum)?,
        back: t.to_vec(&back)?,
    })
}

/// A `rows x cols` complex field: forward in place, then inverse.
fn field_transforms(
    t: &TaskContext,
    field: &[Complex32],
    rows: usize,
    cols: usize,
) -> Result<FieldResult> {
    let plan = Plan::new(&[rows, cols]);
    let mut data = t.from_host(field)?;
    let mut back = t.zeros::<Complex32>(rows * cols)?;
    plan.forward_in_place(t, &mut data)?;
    plan.inverse(t, &data, &mut back)?;
    Ok(FieldResult {
        spectrum: t.to_vec(&data)?,
        back: t.to_vec(&back)?,
    })
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // (The bundle passes an output folder; this example writes nothing.)
    let rt = gpu::runtime()?;
    let ((n, batch), (rows, cols)) = match rt.backend() {
        BackendKind::Cuda => ((1000, 64), (96, 80)),
        BackendKind::Host => ((120, 8), (24, 20)),
    };
    println!(
        "15-fft: backend {} ({}); transforms by {}",
        rt.backend(),
        rt.device_name(),
        match rt.backend() {
            BackendKind::Cuda => "cuFFT",
            BackendKind::Host => "rustfft",
        }
    );

    // The signals: a few tones each, and a step; the field: a smooth bump
    // times a wave.
    let signals: Vec<f64> = (0..batch * n)
        .map(|i| {
            let (s, j) = ((i / n) as f64, (i % n) as f64);
            (2.0 * PI * (s + 1.0) * j / n as f64).sin()
                + 0.5 * (2.0 * PI * 7.0 * j / n as f64).cos()
                + if j < n as f64 / 3.0 { 0.25 } else { 0.0 }
        })
        .collect();
    let field: Vec<Complex32> = (0..rows * cols)
        .map(|i| {
            let (r, c) = ((i / cols) as f32, (i % cols) as f32);
            let bump =
                (-((r - rows as f32 / 2.0).powi(2) + (c - cols as f32 / 3.0).powi(2)) / 40.0).exp();
            Complex32::from_polar(bump, 0.3 * c + 0.1 * r)
        })
        .collect();

    // The two transforms as sibling tasks.
    let (mut real, mut field2) = (None, None);
    gpu::scope(|s| {
        let (signals, field) = (&signals, &field);
        let (real, field2) = (&mut real, &mut field2);
        s.spawn(move |t| {
            *real = Some(real_transforms(t, signals, n, batch)?);
            Ok(())
        });
        s.spawn(move |t| {
            *field2 = Some(field_transforms(t, field, rows, cols)?);
            Ok(())
        });
        Ok(())
    })?;
    let (real, field2) = (
        real.expect("set by its task"),
        field2.expect("set by its task"),
    );

    // The real signals: each half spectrum against the direct DFT, and
    // the round trip against n x.
    let half = n / 2 + 1;
    let mut worst = 0.0f64;
    for sig in 0..batch {
        let x: Vec<Complex64> = signals[sig * n..(sig + 1) * n]
            .iter()
            .map(|&v| Complex64::new(v, 0.0))
            .collect();
        let want = dft(&x, n, 1);
        let got = real.spectrum[sig * half..(sig + 1) * half].iter().copied();
        worst = worst.max(difference(got, &want[..half]));
    }
    let trip = real
        .back
        .iter()
        .zip(&signals)
        .fold(0.0f64, |m, (b, x)| m.max((b / n as f64 - x).abs()));
    println!(
        "  {batch} real signals of {n} points (f64): half spectra ({half} each) differ from \
         the direct DFT by {worst:.1e}; inverse / n differs from the signals by {trip:.1e}"
    );
    if worst > 1e-12 || trip > 1e-12 {
        return Err(format!("the real transforms are off: {worst:e}, {trip:e}").into());
    }

    // The 2D field.
    let x: Vec<Complex64> = field
        .iter()
        .map(|v| Complex64::new(f64::from(v.re), f64::from(v.im)))
        .collect();
    let want = dft_2d(&x, rows, cols);
    let to64 = |v: &Complex32| Complex64::new(f64::from(v.re), f64::from(v.im));
    let worst2 = difference(field2.spectrum.iter().map(to64), &want);
    let points = (rows * cols) as f64;
    let trip2 = difference(field2.back.iter().map(|v| to64(v) / points), &x);
    println!(
        "  a {rows} x {cols} complex field (f32), in place: differs from the direct 2D DFT by \
         {worst2:.1e}; inverse / {} differs from the field by {trip2:.1e}",
        rows * cols
    );
    if worst2 > 1e-5 || trip2 > 1e-5 {
        return Err(format!("the 2D transforms are off: {worst2:e}, {trip2:e}").into());
    }
    println!("  both match the direct DFT (relative to the largest value)");
    Ok(())
}
