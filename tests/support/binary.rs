//! The built server binary run as a child process: a `Command` for it
//! with a clean environment, a run to its exit, and [`Running`], a server
//! whose bound address is read from its startup line on stderr, whose log
//! is read line by line as it comes, and which is killed when dropped.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::client::get;
use super::exposition::Exposition;
use super::{poll, procfs};

/// How long the binary may take to print its startup line.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// The built server binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_keepalive-server");

/// Removes ANSI escape sequences: CSI (`ESC [`, parameter and intermediate
/// bytes, then a final byte in `@`..=`~`, e.g. `ESC[1;32m`, `ESC[2~`), and
/// the other escapes (`ESC`, any intermediate bytes in ` `..=`/`, then one
/// final byte, e.g. `ESC(B`, `ESC7`). Text after a sequence is kept.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(' '..='/') => {
                for c in chars.by_ref() {
                    if !(' '..='/').contains(&c) {
                        break;
                    }
                }
            }
            // A two-byte escape, or a lone ESC at the end of the line.
            _ => {}
        }
    }
    out
}

/// A `Command` for the binary with logging on, colour off and no `KAS_*`
/// variables inherited from the test environment.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args);
    hermetic(command)
}

/// Like `command`, with the binary run under `ulimit -n limit`, through
/// `sh -c 'ulimit -n LIMIT && exec "$0" "$@"' BIN ARGS...`: `exec` keeps the
/// shell's pid, so the child's pid is the server's.
pub fn command_with_fd_limit(limit: u32, args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args);
    hermetic(command)
}

fn hermetic(mut command: Command) -> Command {
    command.env("RUST_LOG", "info").env("NO_COLOR", "1");
    // Set by systemd for a unit with credentials: it moves relative TLS paths.
    command.env_remove("CREDENTIALS_DIRECTORY");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("KAS_") {
            command.env_remove(name);
        }
    }
    command
}

/// Spawns `command` with stdin closed and stdout and stderr piped.
fn spawn_piped(mut command: Command) -> Child {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server binary")
}

/// Runs the binary to completion (it is expected to exit by itself, e.g.
/// on a configuration error), killing it (and failing, with its stderr)
/// after `within`: a bad flag that was accepted would start a server that
/// never exits.
pub fn run_to_exit(command: Command, within: Duration) -> (ExitStatus, String, String) {
    let mut child = spawn_piped(command);
    // Both pipes are drained while waiting: a child blocked writing to a
    // full pipe would never exit.
    let stdout = read_to_end(child.stdout.take().unwrap());
    let stderr = read_to_end(child.stderr.take().unwrap());
    let Some(status) = wait_timeout(&mut child, within) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the binary was still running after {within:?}; stderr: {}",
            stderr.join().unwrap()
        );
    };
    (status, stdout.join().unwrap(), stderr.join().unwrap())
}

fn read_to_end(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Polls `child` until it exits or `within` passes.
pub fn wait_timeout(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    poll(within, || {
        let status = child.try_wait().expect("try_wait");
        status.ok_or_else(|| "still running".to_owned())
    })
    .ok()
}

/// Starts the binary on 127.0.0.1:0 with `args` after that, and waits for
/// its startup line.
pub fn serve(args: &[&str]) -> Running {
    let mut all = vec!["--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    Running::start(command(&all))
}

/// The server binary running as a child process (killed when dropped).
pub struct Running {
    pub child: Child,
    pub addr: SocketAddr,
    /// Diagnostics (stderr) after the startup line, ANSI stripped.
    pub lines: Receiver<String>,
    /// Standard output (the access log with `--access-log -`).
    pub stdout: Receiver<String>,
    /// Every line from stdout and stderr, in the order they arrived.
    log: Arc<Mutex<Vec<String>>>,
    /// The threads reading stdout and stderr: finished at the pipes' end.
    readers: [JoinHandle<()>; 2],
}

impl Running {
    /// Starts the binary and waits for its `listening on http://ADDR/` line.
    pub fn start(command: Command) -> Running {
        let mut running = Running::spawn(command);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let mut seen = Vec::new();
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match running.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = listening_on(&line) {
                        break addr.parse().expect("http://ADDR/ in the startup line");
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = running.child.kill();
                    let out: Vec<String> = running.stdout.try_iter().collect();
                    panic!("no startup line; stderr: {seen:?}; stdout: {out:?}");
                }
            }
        };
        running.addr = addr;
        running
    }

    /// The child, its output forwarded; `addr` not known yet.
    fn spawn(command: Command) -> Running {
        let mut child = spawn_piped(command);
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stdout, out_reader) = forward_lines(child.stdout.take().unwrap(), Arc::clone(&log));
        let (lines, err_reader) = forward_lines(child.stderr.take().unwrap(), Arc::clone(&log));
        Running {
            child,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            lines,
            stdout,
            log,
            readers: [out_reader, err_reader],
        }
    }

    /// Starts the binary with `--listen` on a free port and waits until it
    /// accepts connections there: for runs that log nothing (`RUST_LOG=off`).
    pub fn start_silent(mut command: Command) -> Running {
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = free.local_addr().unwrap();
        drop(free);
        command.arg("--listen").arg(addr.to_string());
        let mut running = Running::spawn(command);
        running.addr = addr;
        if let Err(why) = poll(STARTUP_TIMEOUT, || {
            TcpStream::connect(addr).map_err(|e| e.to_string())
        }) {
            let _ = running.child.kill();
            panic!(
                "nothing listening on {addr} ({why}); log: {:?}",
                running.log()
            );
        }
        running
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The admin listener's address, from the startup line's `admin=`.
    pub fn admin_addr(&self) -> SocketAddr {
        let log = self.log();
        let line = log
            .iter()
            .find_map(|line| line.split_once(" admin=http://"))
            .unwrap_or_else(|| panic!("no admin= in the startup line: {log:?}"));
        let addr = line.1.split_once('/').expect("admin=http://ADDR/").0;
        addr.parse().expect("an admin address")
    }

    /// Sends `signal` (e.g. `TERM`, `INT`) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits up to `within` for the process to exit.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        wait_timeout(&mut self.child, within)
    }

    /// Every line logged so far, the startup line included: stdout and
    /// stderr in the order they arrived, ANSI stripped. Unlike `lines` and
    /// `output`, it consumes nothing, so it can be read again and again.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Waits up to `within` for the end of both pipes (after the process
    /// has exited): from then on `log`, `lines` and `stdout` hold
    /// everything it wrote.
    #[track_caller]
    pub fn wait_for_output_end(&self, within: Duration) {
        let ended = poll(within, || {
            match self.readers.iter().all(JoinHandle::is_finished) {
                true => Ok(()),
                false => Err("open".to_owned()),
            }
        });
        assert!(
            ended.is_ok(),
            "stdout or stderr still open after {within:?}; log: {:?}",
            self.log()
        );
    }

    /// The admin listener's `/metrics`, parsed (the binary must have been
    /// started with `--admin`).
    pub fn metrics(&self) -> Exposition {
        let response = get(self.admin_addr(), "/metrics");
        assert_eq!(response.status, 200, "/metrics: {response:?}");
        Exposition::parse(&response.text())
    }

    /// CPU time used so far (utime + stime), in clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        procfs::cpu_ticks(&self.pid().to_string())
    }

    /// Everything written so far (stderr then stdout) and not yet taken
    /// from `lines` or `stdout`.
    pub fn output(&self) -> String {
        let mut out: Vec<String> = self.lines.try_iter().collect();
        out.extend(self.stdout.try_iter());
        out.join("\n")
    }

    /// Waits up to `within` for a diagnostic line containing `text`, and
    /// returns it (lines before it are consumed).
    pub fn wait_for_line(&self, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(_) => panic!(
                    "no line with {text:?} within {within:?}; log: {:?}",
                    self.log()
                ),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends each line of `pipe`, ANSI stripped, to the receiver it returns,
/// after appending it to `log`; the thread doing so ends at the pipe's end.
fn forward_lines(
    pipe: impl Read + Send + 'static,
    log: Arc<Mutex<Vec<String>>>,
) -> (Receiver<String>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let line = strip_ansi(&line);
            log.lock().unwrap().push(line.clone());
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}

/// The `ADDR` of `listening on http://ADDR/` (or `https://`) in the
/// startup line.
pub fn listening_on(line: &str) -> Option<&str> {
    let (_, after) = line.split_once("listening on http")?;
    let after = after.strip_prefix("s://").or(after.strip_prefix("://"))?;
    after.split_once('/').map(|(addr, _)| addr)
}
