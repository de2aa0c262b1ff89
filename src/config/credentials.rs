//! systemd credentials: with `LoadCredential=cert.pem:/etc/...`, systemd
//! reads the file as root and hands the service a private, read-only copy
//! in the directory it names in `$CREDENTIALS_DIRECTORY`, which is how a
//! `DynamicUser=` service reads a key no other user may. A relative
//! `tls_cert` or `tls_key` (flag, variable or file key) names a file in
//! that directory when it is set, as programs that support credentials
//! natively do; without it, a relative path is relative to the working
//! directory as usual. (The unit may instead name the copies with systemd's
//! `%d`: `Environment=KAS_TLS_KEY=%d/key.pem`, an absolute path.)

use std::path::{Path, PathBuf};

use super::Config;

/// The variable systemd sets when a unit has credentials.
const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";

/// Makes a relative `tls_cert` or `tls_key` a path in `credentials` (the
/// value of `$CREDENTIALS_DIRECTORY`), when that is set and not empty.
pub(super) fn find_tls_files_in(config: &mut Config, credentials: Option<&Path>) {
    let Some(dir) = credentials.filter(|dir| !dir.as_os_str().is_empty()) else {
        return;
    };
    for path in [&mut config.tls_cert, &mut config.tls_key]
        .into_iter()
        .flatten()
    {
        if path.is_relative() {
            *path = dir.join(&*path);
        }
    }
}

/// `$CREDENTIALS_DIRECTORY`, if set.
pub(super) fn directory() -> Option<PathBuf> {
    std::env::var_os(CREDENTIALS_DIRECTORY).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_tls_paths_are_found_in_the_credentials_directory() {
        let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
        config.tls_cert = Some("cert.pem".into());
        config.tls_key = Some("/etc/kas/key.pem".into());
        find_tls_files_in(&mut config, None);
        assert_eq!(config.tls_cert.as_deref(), Some(Path::new("cert.pem")));
        find_tls_files_in(&mut config, Some(Path::new("")));
        assert_eq!(config.tls_cert.as_deref(), Some(Path::new("cert.pem")));
        let dir = Path::new("/run/credentials/keepalive-server.service");
        find_tls_files_in(&mut config, Some(dir));
        assert_eq!(config.tls_cert, Some(dir.join("cert.pem")));
        assert_eq!(
            config.tls_key.as_deref(),
            Some(Path::new("/etc/kas/key.pem")),
            "an absolute path stays"
        );
    }
}
