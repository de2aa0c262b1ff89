//! The server under test: starting and stopping it, waiting until it
//! accepts, and sampling it through /proc (RSS, per-thread context
//! switches).

use std::fs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::Args;

/// A server this tool started; stopped (SIGTERM, then SIGKILL) on drop.
pub struct Spawned {
    pub child: Child,
    pub command: String,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn spawn_server(bin: &PathBuf, args: &Args) -> Result<Spawned, String> {
    // Someone else listening there would answer instead of our server.
    if let Err(e) = std::net::TcpListener::bind(args.addr) {
        return Err(format!(
            "cannot use {} for the server: {e} (pick another with --addr)",
            args.addr
        ));
    }
    let mut server_args = args.server_args.clone();
    if !server_args
        .iter()
        .any(|a| a == "--listen" || a.starts_with("--listen="))
    {
        server_args.push("--listen".into());
        server_args.push(args.addr.to_string());
    }
    let (stdout, stderr) = match &args.server_log {
        Some(path) => {
            let file = fs::File::create(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            let clone = file.try_clone().map_err(|e| e.to_string())?;
            (Stdio::from(file), Stdio::from(clone))
        }
        None => (Stdio::null(), Stdio::null()),
    };
    let child = Command::new(bin)
        .args(&server_args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let command = std::iter::once(bin.display().to_string())
        .chain(server_args)
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Spawned { child, command })
}

/// Waits until the server accepts connections (a bare connect, no request:
/// it leaves no timer armed behind).
pub fn wait_ready(addr: SocketAddr, mut spawned: Option<&mut Spawned>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(s) = spawned.as_deref_mut()
            && let Ok(Some(status)) = s.child.try_wait()
        {
            return Err(format!(
                "server exited at startup ({status}); see --server-log"
            ));
        }
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => {
                // Let the server see the close before anything is sampled.
                std::thread::sleep(Duration::from_millis(300));
                if let Some(s) = spawned.as_deref_mut()
                    && let Ok(Some(status)) = s.child.try_wait()
                {
                    return Err(format!(
                        "server exited at startup ({status}); see --server-log"
                    ));
                }
                return Ok(());
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("server at {addr} not reachable: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// VmRSS of `pid`, in bytes.
pub fn rss_bytes(pid: u32) -> Result<u64, String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status_field(&status, "VmRSS:")
        .map(|kb| kb * 1024)
        .ok_or_else(|| format!("no VmRSS in /proc/{pid}/status"))
}

fn status_field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// One thread's context switches over an idle span.
#[derive(Debug, Clone)]
pub struct ThreadWakeups {
    pub tid: u32,
    pub name: String,
    pub voluntary: u64,
    pub involuntary: u64,
}

fn thread_switches(pid: u32) -> Result<Vec<ThreadWakeups>, String> {
    let dir = format!("/proc/{pid}/task");
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = fs::read_to_string(entry.path().join("status")) else {
            continue; // the thread exited
        };
        let name = status
            .lines()
            .find_map(|l| l.strip_prefix("Name:"))
            .map_or_else(String::new, |n| n.trim().to_string());
        out.push(ThreadWakeups {
            tid,
            name,
            voluntary: status_field(&status, "voluntary_ctxt_switches:").unwrap_or(0),
            involuntary: status_field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0),
        });
    }
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// Context-switch deltas of every server thread over `span`.
pub fn idle_wakeups(pid: u32, span: Duration) -> Result<IdleCheck, String> {
    let before = thread_switches(pid)?;
    std::thread::sleep(span);
    let after = thread_switches(pid)?;
    let threads = after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.tid == a.tid);
            ThreadWakeups {
                tid: a.tid,
                name: a.name.clone(),
                voluntary: a.voluntary - b.map_or(0, |b| b.voluntary),
                involuntary: a.involuntary - b.map_or(0, |b| b.involuntary),
            }
        })
        .collect();
    Ok(IdleCheck { span, threads })
}

#[derive(Debug)]
pub struct IdleCheck {
    pub span: Duration,
    pub threads: Vec<ThreadWakeups>,
}

impl IdleCheck {
    pub fn total(&self) -> u64 {
        self.threads
            .iter()
            .map(|t| t.voluntary + t.involuntary)
            .sum()
    }
}
