//! The physical reference for the loopback benchmark: how fast 1 MiB buffers go through a
//! 127.0.0.1 TCP socket with nothing else (no HTTP, no decoding). A writer thread sends, a reader
//! thread receives into a 1 MiB buffer and touches nothing; `--streams N` runs N such connections at
//! once. Threads are pinned by the caller (`taskset`), like the HTTP servers and clients.
//!
//!     rustc -O bench/rust/socket_bandwidth.rs -o /tmp/socket_bandwidth
//!     taskset -c 0,1 /tmp/socket_bandwidth --streams 1 --mib 2000
//!     # or: writer on core 0, reader on core 1, as the servers and clients of loopback.sh
//!     /tmp/socket_bandwidth --streams 1 --writer-cpu 0 --reader-cpu 1
//!
//! Prints one line: `streams=N MiB=M seconds=S MB_per_s=X Gbit_per_s=Y` (MB = 10^6 bytes).
//! Std only, so it builds with plain rustc.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_string())
}

/// Pins the calling thread to one CPU (Linux `sched_setaffinity`); no-op when `cpu` is negative.
fn pin(cpu: i64) {
    if cpu < 0 {
        return;
    }
    unsafe extern "C" {
        fn sched_setaffinity(pid: i32, cpusetsize: usize, mask: *const u64) -> i32;
    }
    let mask: [u64; 16] = {
        let mut m = [0u64; 16];
        m[(cpu / 64) as usize] = 1u64 << (cpu % 64);
        m
    };
    let rc = unsafe { sched_setaffinity(0, std::mem::size_of_val(&mask), mask.as_ptr()) };
    assert_eq!(rc, 0, "sched_setaffinity({cpu}) failed");
}

fn main() {
    let streams: usize = arg("--streams", "1").parse().expect("--streams N");
    let mib: usize = arg("--mib", "2000").parse().expect("--mib N (MiB per run, all streams together)");
    let wcpu: i64 = arg("--writer-cpu", "-1").parse().expect("--writer-cpu N");
    let rcpu: i64 = arg("--reader-cpu", "-1").parse().expect("--reader-cpu N");
    let per_stream = mib / streams;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let readers: Vec<_> = (0..streams)
        .map(|_| {
            let s = TcpStream::connect(addr).expect("connect");
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    let writers: Vec<TcpStream> = (0..streams).map(|_| listener.accept().expect("accept").0).collect();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2 * streams + 1));
    let mut handles = Vec::new();
    for mut w in writers {
        let b = barrier.clone();
        handles.push(std::thread::spawn(move || {
            pin(wcpu);
            let buf = vec![0x5au8; 1 << 20];
            b.wait();
            for _ in 0..per_stream {
                w.write_all(&buf).expect("write");
            }
        }));
    }
    for mut r in readers {
        let b = barrier.clone();
        handles.push(std::thread::spawn(move || {
            pin(rcpu);
            let mut buf = vec![0u8; 1 << 20];
            b.wait();
            let mut left = per_stream << 20;
            while left > 0 {
                let n = r.read(&mut buf[..left.min(1 << 20)]).expect("read");
                assert!(n > 0, "peer closed early");
                left -= n;
            }
        }));
    }
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = (per_stream * streams) as f64 * (1u64 << 20) as f64;
    println!(
        "streams={streams} MiB={} seconds={secs:.3} MB_per_s={:.1} Gbit_per_s={:.2}",
        per_stream * streams,
        bytes / secs / 1e6,
        bytes * 8.0 / secs / 1e9
    );
}
