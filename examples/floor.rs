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

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18470".into());
    let mut listener = TcpListener::bind(addr.parse().expect("an address"))?;
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
