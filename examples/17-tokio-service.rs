//! # 17: a tokio service that answers requests with GPU work
//!
//! A small service on a multi-thread tokio runtime: clients send requests
//! (`y = a x + b` over a vector of their own) through a channel; the
//! server answers each in a tokio task of its own, which queues its GPU
//! work in a `gpu::scope` and awaits the copy of the result
//! (`to_vec_async`): no executor thread waits for the device, so the
//! requests' work overlaps on the GPU while the runtime's few threads
//! keep accepting requests. Every tenth request also awaits the scope's
//! completion itself (`gpu::scope_async`) before answering. The clients
//! check each answer against the host's.
//!
//! ```text
//! cargo run -p gpu-examples --example 17-tokio-service
//! ```

use gpu_kernels as k;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// One request: `y = a x + b`.
struct Request {
    x: Vec<f32>,
    a: f32,
    b: f32,
    reply: oneshot::Sender<gpu::Result<Vec<f32>>>,
}

const CLIENTS: usize = 8;
const PER_CLIENT: usize = 25;
const LEN: usize = 1 << 14;

/// The answer to one request, computed on the GPU.
async fn answer(id: usize, x: Vec<f32>, a: f32, b: f32) -> gpu::Result<Vec<f32>> {
    if id % 10 == 0 {
        // Await the scope's device work itself (all of it done on the
        // device), then the copy back.
        let mut y = gpu::Buffer::<f32>::zeros(LEN)?;
        gpu::scope_async(|s| {
            let xs = s.from_host(&x)?;
            k::fill(s, &mut y, b)?;
            k::axpy(s, a, &xs, &mut y)
        })
        .await?;
        return y.to_vec_async()?.await;
    }
    // Queue the work and the copy back; the future owns where the copy
    // lands, and is `Send + 'static`: it leaves the scope and is awaited.
    let data = gpu::scope(|s| {
        let xs = s.from_host(&x)?;
        let mut y = s.zeros::<f32>(LEN)?;
        k::fill(s, &mut y, b)?;
        k::axpy(s, a, &xs, &mut y)?;
        s.to_vec_async(&y)
    })?;
    data.await
}

/// The server: a tokio task per request.
async fn serve(mut requests: mpsc::Receiver<Request>) {
    let mut id = 0;
    while let Some(r) = requests.recv().await {
        id += 1;
        tokio::spawn(async move {
            let y = answer(id, r.x, r.a, r.b).await;
            let _ = r.reply.send(y);
        });
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    println!(
        "17-tokio-service: backend {backend}; {CLIENTS} clients x {PER_CLIENT} requests, \
         y = a x + b over {LEN} floats each"
    );
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    let start = Instant::now();
    let checked = tokio_rt.block_on(async {
        let (tx, rx) = mpsc::channel::<Request>(64);
        let server = tokio::spawn(serve(rx));
        let mut clients = Vec::new();
        for c in 0..CLIENTS {
            let tx = tx.clone();
            clients.push(tokio::spawn(async move {
                let mut ok = 0;
                for r in 0..PER_CLIENT {
                    let x: Vec<f32> = (0..LEN).map(|i| ((i + c * 7 + r) % 101) as f32).collect();
                    let (a, b) = (c as f32 + 1.0, r as f32);
                    let (reply, answer) = oneshot::channel();
                    tx.send(Request {
                        x: x.clone(),
                        a,
                        b,
                        reply,
                    })
                    .await
                    .expect("the server is up");
                    let y = answer.await.expect("the server answers")?;
                    let bad = y.iter().zip(&x).position(|(y, x)| *y != a * x + b);
                    if let Some(i) = bad {
                        panic!("client {c}, request {r}: y[{i}] = {}", y[i]);
                    }
                    ok += 1;
                }
                Ok::<usize, gpu::Error>(ok)
            }));
        }
        drop(tx);
        let mut checked = 0;
        for c in clients {
            checked += c.await.expect("a client panicked")?;
        }
        server.await.expect("the server panicked");
        Ok::<usize, gpu::Error>(checked)
    })?;
    let took = start.elapsed();
    assert_eq!(checked, CLIENTS * PER_CLIENT);
    println!(
        "  {checked} requests answered and checked in {took:.2?} ({:.1?} per request, \
         {CLIENTS} in flight)",
        took / checked as u32
    );
    Ok(())
}
