// safetensors 0.8's five steps with Rust's standard library only: create a temporary sibling read-write,
// preallocate it with set_len (ftruncate), write it from the start through a 1 MiB buffer, rename it
// onto the target while it is open, close it.
// usage: tmp_then_rename DIR TOTAL WRITTEN  (bytes preallocated, bytes written: i % 251)
use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = &args[1];
    let total: u64 = args[2].parse().expect("TOTAL");
    let written: usize = args[3].parse().expect("WRITTEN");
    let tmp = format!("{}/.tmpRust01", dir);
    let target = format!("{}/model.safetensors", dir);
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(&tmp).expect("open");
    file.set_len(total).expect("set_len");
    let data: Vec<u8> = (0..written).map(|i| (i % 251) as u8).collect();
    let mut writer = BufWriter::with_capacity(1 << 20, &file);
    writer.write_all(&data).expect("write");
    writer.flush().expect("flush");
    drop(writer);
    fs::rename(&tmp, &target).expect("rename");
    drop(file);
    println!("ok");
}
