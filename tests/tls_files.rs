//! Certificate and key mistakes (`--tls-cert`, `--tls-key`), each said in
//! words with its fix, exit 2, at start and with `--check` alike: a key of
//! another certificate, an encrypted key, a chain whose first certificate
//! is not the server's own, the two files swapped, and half a pair named
//! as the user set the other half (flag, config file key, variable). The
//! files are made by rcgen in a temporary directory.

mod support;

use std::process::Command;
use std::time::Duration;

use support::binary::{command, run_to_exit};
use support::tls::{TestCert, ca_and_leaf};

/// Runs the binary with `args`, once with `--check` and once to start on
/// port 0, customised by `env`: both must exit 2; their stderr, joined.
fn refused(args: &[&str], env: impl Fn(&mut Command)) -> String {
    let mut said = Vec::new();
    for first in ["--check", "--listen=127.0.0.1:0"] {
        let mut all = vec![first];
        all.extend_from_slice(args);
        let mut command = command(&all);
        env(&mut command);
        let (status, stdout, stderr) = run_to_exit(command, Duration::from_secs(20));
        assert_eq!(status.code(), Some(2), "{first} {args:?}: {stderr}");
        assert!(!stdout.contains("listening"), "{stdout}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        said.push(stderr);
    }
    assert_eq!(said[0], said[1], "--check says what the start says");
    said.swap_remove(0)
}

fn no_env(_: &mut Command) {}

/// `--check` with this certificate and key: its status code and output.
fn check_pair(cert: &str, key: &str) -> (Option<i32>, String, String) {
    let (status, stdout, stderr) = run_to_exit(
        command(&["--check", "--tls-cert", cert, "--tls-key", key]),
        Duration::from_secs(20),
    );
    (status.code(), stdout, stderr)
}

#[test]
fn a_matching_pair_passes_check() {
    let cert = TestCert::new();
    let (status, stdout, stderr) = check_pair(cert.cert_arg(), cert.key_arg());
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stdout.contains("tls_cert = "), "{stdout}");
}

#[test]
fn a_key_of_another_certificate_is_named_with_how_to_compare_them() {
    let cert = TestCert::new();
    let other = TestCert::new();
    let said = refused(
        &["--tls-cert", cert.cert_arg(), "--tls-key", other.key_arg()],
        no_env,
    );
    assert!(
        said.starts_with("error: --tls-key: "),
        "the key is at fault: {said}"
    );
    assert!(
        said.contains(&format!(
            "{} is not the private key of the certificate in {}",
            other.key_arg(),
            cert.cert_arg()
        )),
        "{said}"
    );
    assert!(said.contains("openssl pkey -pubout -in"), "{said}");
    assert!(
        !said.contains("KeyMismatch"),
        "no library debug output: {said}"
    );
}

#[test]
fn an_encrypted_key_says_so_and_how_to_decrypt_it() {
    let cert = TestCert::new();
    let pem = cert.key_pem();
    // The label (PKCS#8) or the header (OpenSSL's traditional format) is
    // what marks a key encrypted; the bytes inside do not matter here.
    let pkcs8 = pem.replace("PRIVATE KEY", "ENCRYPTED PRIVATE KEY");
    let traditional = pem.replacen(
        "-----\n",
        "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00112233445566778899AABBCCDDEEFF\n\n",
        1,
    );
    for (name, text) in [("pkcs8.pem", pkcs8), ("traditional.pem", traditional)] {
        let key = cert.file(name, text.as_bytes());
        let key = key.to_str().unwrap();
        let said = refused(&["--tls-cert", cert.cert_arg(), "--tls-key", key], no_env);
        assert!(
            said.contains("the private key is encrypted"),
            "{name}: {said}"
        );
        assert!(
            said.contains(&format!("`openssl pkey -in {key} -out key-plain.pem`")),
            "{name}: {said}"
        );
        assert!(!said.contains("no items found"), "{name}: {said}");
    }
}

#[test]
fn a_chain_that_does_not_start_with_the_leaf_says_where_the_leaf_is() {
    let cert = TestCert::new();
    let (ca, leaf, leaf_key) = ca_and_leaf();
    let key = cert.file("leaf-key.pem", leaf_key.as_bytes());
    let wrong = cert.file("wrong-order.pem", format!("{ca}{leaf}").as_bytes());
    let said = refused(
        &[
            "--tls-cert",
            wrong.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        no_env,
    );
    assert!(said.starts_with("error: --tls-cert: "), "{said}");
    assert!(
        said.contains("the first certificate is not the server's own"),
        "{said}"
    );
    assert!(said.contains("belongs to certificate 2 of 2"), "{said}");
    assert!(said.contains("leaf) certificate first"), "{said}");

    let right = cert.file("right-order.pem", format!("{leaf}{ca}").as_bytes());
    let (status, _, stderr) = check_pair(right.to_str().unwrap(), key.to_str().unwrap());
    assert_eq!(status, Some(0), "leaf first loads: {stderr}");
}

#[test]
fn swapped_files_are_called_swapped() {
    let cert = TestCert::new();
    let said = refused(
        &["--tls-cert", cert.key_arg(), "--tls-key", cert.cert_arg()],
        no_env,
    );
    assert!(
        said.contains("holds a private key, not a certificate"),
        "{said}"
    );
    assert!(said.contains("swapped"), "{said}");
}

#[test]
fn half_a_pair_names_the_missing_half_as_the_other_was_given() {
    let cert = TestCert::new();
    let said = refused(&["--tls-cert", cert.cert_arg()], no_env);
    assert!(
        said.contains("--tls-cert is set but --tls-key is not"),
        "{said}"
    );
    let said = refused(&["--tls-key", cert.key_arg()], no_env);
    assert!(
        said.contains("--tls-key is set but --tls-cert is not"),
        "{said}"
    );

    let config = cert.file(
        "server.toml",
        format!("tls_cert = {:?}\n", cert.cert_arg()).as_bytes(),
    );
    let said = refused(&["--config", config.to_str().unwrap()], no_env);
    assert!(
        said.contains("`tls_cert` in the config file is set but `tls_key` is not"),
        "{said}"
    );

    let said = refused(&[], |command| {
        command.env("KAS_TLS_CERT", cert.cert_arg());
    });
    assert!(
        said.contains("KAS_TLS_CERT is set but KAS_TLS_KEY is not"),
        "{said}"
    );
}
