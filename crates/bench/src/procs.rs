//! Resource use of a measured process (and its children, for multi-process peers such as
//! LiteLLM with several workers), read from `/proc`: CPU time and resident memory.

use std::collections::HashMap;
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ, 100 on every Linux build
/// sluice targets).
const TICKS_PER_SEC: f64 = 100.0;

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    /// User + system CPU time of every process in the tree.
    pub cpu: Duration,
    /// Resident memory, summed over the tree, in bytes.
    pub rss: u64,
}

/// The root process and its descendants, found through each process's parent id.
fn tree(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = stat_fields(pid).and_then(|f| f.get(1).and_then(|s| s.parse().ok()))
            {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

/// Fields of `/proc/<pid>/stat` after the command name: index 0 is the state, 1 the parent,
/// 11 and 12 user and system time.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

fn status_kb(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Read a process tree now; `None` when the root is gone.
pub fn read(root: u32) -> Option<Reading> {
    let mut r = Reading::default();
    for pid in tree(root) {
        let rss = status_kb(pid, "VmRSS:");
        if pid == root && rss.is_none() {
            return None;
        }
        r.rss += rss.unwrap_or(0) * 1024;
        if let Some(f) = stat_fields(pid) {
            let ticks: u64 = [11, 12]
                .iter()
                .filter_map(|i| f.get(*i).and_then(|s| s.parse::<u64>().ok()))
                .sum();
            r.cpu += Duration::from_secs_f64(ticks as f64 / TICKS_PER_SEC);
        }
    }
    Some(r)
}

/// Samples a process tree's memory in the background while a level runs, keeping the
/// highest total seen (a process's own `VmHWM` would miss its worker processes).
#[derive(Debug)]
pub struct PeakSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<u64>,
}

impl PeakSampler {
    /// Start sampling `root` every `every`.
    pub fn start(root: u32, every: Duration) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut peak = 0;
            loop {
                if let Some(r) = read(root) {
                    peak = peak.max(r.rss);
                }
                tokio::select! {
                    _ = &mut stopped => break,
                    () = tokio::time::sleep(every) => {}
                }
            }
            if let Some(r) = read(root) {
                peak = peak.max(r.rss);
            }
            peak
        });
        Self { stop, task }
    }

    /// Stop and return the peak total RSS in bytes.
    pub async fn finish(self) -> u64 {
        let _ = self.stop.send(());
        self.task.await.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let r = read(std::process::id()).unwrap();
        assert!(r.rss > 1024 * 1024);
        assert!(read(u32::MAX).is_none());
    }
}
