// Writes TOTAL bytes to PATH in CHUNK-byte writes through rustix (docs/benchmarks.md, "Raw system calls").
// usage: rustix_writer raw|std-open|raw-pwrite0 PATH TOTAL CHUNK
//   raw       openat, write and close are rustix's own system calls (no libc: the library sees them only
//             through the raw-system-call layer, when it traps)
//   std-open  the file is opened and closed through the standard library (libc: the library tracks it, and
//             APPENDGUARD_SYSCALLS=auto then traps); the writes are rustix's
//   raw-pwrite0  as raw, then one rustix pwrite of 2 bytes at offset 0 (an overwrite: the library refuses
//             it where it sees it); prints `pwrite_at_0=ok` or `pwrite_at_0=ERRNO` first
// Prints `write_s=SECONDS written=BYTES`.
use rustix::fd::{AsFd, IntoRawFd};
use std::time::Instant;

use rustix::fs::{cwd, openat, Mode, OFlags};

fn write_all<Fd: AsFd>(fd: Fd, buffer: &[u8], total: u64) -> u64 {
    let mut written = 0u64;
    while written < total {
        let want = std::cmp::min(buffer.len() as u64, total - written) as usize;
        match rustix::io::write(&fd, &buffer[..want]) {
            Ok(n) => written += n as u64,
            Err(e) => {
                eprintln!("rustix_writer: write at {written}: {e}");
                std::process::exit(1);
            }
        }
    }
    written
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: rustix_writer raw|std-open|raw-pwrite0 PATH TOTAL CHUNK");
        std::process::exit(2);
    }
    let (mode, path) = (args[1].as_str(), args[2].as_str());
    let total: u64 = args[3].parse().expect("TOTAL");
    let chunk: usize = args[4].parse().expect("CHUNK");
    let buffer: Vec<u8> = (0..chunk).map(|i| (i % 251) as u8).collect();
    let start = Instant::now();
    let written = match mode {
        "raw" | "raw-pwrite0" => {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC;
            let fd = openat(cwd(), path, flags, Mode::from_bits_truncate(0o644)).unwrap_or_else(|e| {
                eprintln!("rustix_writer: openat {path}: {e}");
                std::process::exit(1)
            });
            let written = write_all(&fd, &buffer, total);
            if mode == "raw-pwrite0" {
                match rustix::io::pwrite(&fd, b"zz", 0) {
                    Ok(_) => println!("pwrite_at_0=ok"),
                    Err(e) => println!("pwrite_at_0={}", e.raw_os_error()),
                }
            }
            unsafe { rustix::io::close(fd.into_raw_fd()) };
            written
        }
        "std-open" => {
            let file = std::fs::File::create(path).unwrap_or_else(|e| {
                eprintln!("rustix_writer: create {path}: {e}");
                std::process::exit(1)
            });
            let written = write_all(&file, &buffer, total);
            drop(file);
            written
        }
        _ => {
            eprintln!("rustix_writer: mode is raw, std-open or raw-pwrite0, not {mode}");
            std::process::exit(2);
        }
    };
    println!("write_s={:.4} written={written}", start.elapsed().as_secs_f64());
}
