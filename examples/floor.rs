//! The floor for keep-alive benchmarks: a bare mio loop that answers every
//! read with a canned `Hello, World!` response. No parsing, no timers, no
//! Date, no state: what the kernel and the event loop cost alone.
//! `scripts/loadtest.sh` measures it beside the server and nginx.
//!
//! Usage: cargo run --release --example floor -- 127.0.0.1:18470

use std::io::{ErrorKind, Read, Write};

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
const LISTENER: Token = Token(usize::MAX - 1);

const USAGE: &str = "usage: floor [ADDR]   (default 127.0.0.1:18470)";

fn main() -> std::io::Result<()> {
    let arg = std::env::args().nth(1);
    let addr = match arg.as_deref() {
        Some("-h" | "--help") => {
            println!("{USAGE}\nA bare mio loop answering every request with Hello, World!");
            return Ok(());
        }
        Some(text) => text.parse().unwrap_or_else(|e| {
            eprintln!("floor: '{text}' is not an address: {e}\n{USAGE}");
            std::process::exit(2)
        }),
        None => std::net::SocketAddr::from(([127, 0, 0, 1], 18470)),
    };
    let mut listener = TcpListener::bind(addr)?;
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns = Slab::new();
    let mut events = Events::with_capacity(1024);
    let mut buffer = [0u8; 4096];
    loop {
        poll.poll(&mut events, None)?;
        for event in &events {
            if event.token() == LISTENER {
                while let Ok((mut stream, _)) = listener.accept() {
                    let entry = conns.vacant_entry();
                    poll.registry().register(
                        &mut stream,
                        Token(entry.key()),
                        Interest::READABLE,
                    )?;
                    stream.set_nodelay(true)?;
                    entry.insert(stream);
                }
                continue;
            }
            let key = event.token().0;
            let closed = loop {
                let Some(stream) = conns.get_mut(key) else {
                    break false;
                };
                match stream.read(&mut buffer) {
                    Ok(0) => break true,
                    Ok(n) => {
                        // One response per request in the read.
                        let requests = buffer[..n].windows(4).filter(|w| w == b"\r\n\r\n").count();
                        for _ in 0..requests {
                            if stream.write_all(RESPONSE).is_err() {
                                break;
                            }
                        }
                        if n < buffer.len() {
                            break false;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                    Err(_) => break true,
                }
            };
            if closed {
                conns.remove(key);
            }
        }
    }
}
