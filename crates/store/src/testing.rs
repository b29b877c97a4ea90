//! Test databases: a fresh SQLite file, and a fresh database on the PostgreSQL server named by
//! `SLUICE_TEST_POSTGRES_URL` (scripts/services.sh starts one). Without that variable the
//! PostgreSQL half is skipped, loudly and countably ([`skip`]), except under `CI=true`, where a
//! missing server fails the test instead of passing silently. Compiled for this crate's tests
//! and, with the `testing` feature, for the admin API's and the end-to-end tests.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test support: a failure here is a failed test"
)]

use std::path::PathBuf;

use sqlx::{Connection, Executor};

use super::{Backend, Location, Store, StoreOptions};
use sluice_core::Secret;

/// The variable naming the test PostgreSQL server (a URL to any database on it).
pub const POSTGRES_ENV: &str = "SLUICE_TEST_POSTGRES_URL";

/// A store on a throwaway database; the SQLite file is removed on drop.
pub struct TestStore {
    /// The store.
    pub store: Store,
    dir: Option<PathBuf>,
}

impl Drop for TestStore {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl TestStore {
    /// The SQLite file (for a second connection that holds a lock).
    pub fn sqlite_file(&self) -> PathBuf {
        self.dir.as_ref().unwrap().join("sluice.db")
    }

    /// A second store on the same SQLite file (a restart of the process).
    pub async fn reopen(&self) -> Store {
        let dir = self.dir.as_ref().unwrap();
        Store::open(StoreOptions::new(Location::Sqlite(dir.join("sluice.db"))))
            .await
            .unwrap()
    }
}

/// A unique empty directory under the system temp dir.
pub fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-test-{}", sluice_core::random::uuid_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A new SQLite store in its own directory.
pub async fn sqlite() -> TestStore {
    let dir = temp_dir();
    let store = Store::open(StoreOptions::new(Location::Sqlite(dir.join("sluice.db"))))
        .await
        .unwrap();
    TestStore {
        store,
        dir: Some(dir),
    }
}

/// The variables naming the PostgreSQL server outage tests may stop and start, and its
/// control script (`stop` / `start`).
pub const RESTART_ENV: [&str; 2] = [
    "SLUICE_TEST_POSTGRES_RESTART_URL",
    "SLUICE_TEST_POSTGRES_RESTART_CTL",
];

/// The variable naming a file that every skip ([`skip`]) is appended to, one line each, so
/// that a run can count them (`scripts/test.sh` prints how many tests skipped).
pub const SKIPS_ENV: &str = "SLUICE_TEST_SKIPS";

/// A test variable's value, or `None` when it is unset, after [`skip`] said that `service` is
/// missing (a failed test under `CI=true`).
pub fn required_var(name: &str, service: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            skip(service, &format!("set {name}"));
            None
        }
    }
}

/// Skip (the rest of) the running test for want of `service`, so that a skip is never silent:
/// one line on stderr, `skipped: <test>: no <service> (<hint>)`, written past libtest's output
/// capture (which would keep it from a passing test's output), and the same line appended to
/// the file `SLUICE_TEST_SKIPS` names, when set. Under `CI=true` it panics instead: CI starts
/// every service, so a missing one is a broken run, not a pass.
pub fn skip(service: &str, hint: &str) {
    use std::io::Write as _;
    let test = current_test();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: no {service} under CI=true ({hint}; scripts/test.sh starts every service)");
    }
    let line = format!("skipped: {test}: no {service} ({hint})\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os(SKIPS_ENV).filter(|p| !p.is_empty()) {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        // One `write` of a short line to a file opened for appending: lines from tests
        // running at once do not interleave.
        if let Ok(mut f) = file {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// `<test binary>::<test path>` (libtest runs each test on a thread named after it), e.g.
/// `e2e::admin::database_outage_loses_no_spend`: unique across the run's binaries.
fn current_test() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    // Cargo names test binaries `<crate>-<16 hex digits>`.
    let binary = match binary.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => binary,
    };
    let thread = std::thread::current();
    let test = thread
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("a test (not on its own thread)");
    format!("{binary}::{test}")
}

/// The test server's URL, or `None` (after a [`skip`]) when tests may skip it.
pub fn postgres_server() -> Option<String> {
    required_var(POSTGRES_ENV, "PostgreSQL")
}

/// The restartable server's URL and control script, or `None` (after a [`skip`]).
pub fn postgres_restartable() -> Option<(String, String)> {
    let service = "restartable PostgreSQL";
    Some((
        required_var(RESTART_ENV[0], service)?,
        required_var(RESTART_ENV[1], service)?,
    ))
}

/// Stops or starts the restartable server, waiting until it is done.
pub fn pg_ctl(ctl: &str, action: &str) {
    let out = std::process::Command::new(ctl)
        .arg(action)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{ctl} {action}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A URL for a brand-new database on the test server.
pub async fn postgres_database(server: &str) -> String {
    let name = format!("sluice_t_{}", sluice_core::random::uuid_v4().simple());
    sqlx::any::install_default_drivers();
    let mut admin = sqlx::AnyConnection::connect(server).await.unwrap();
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    admin.close().await.unwrap();
    let (base, _) = server.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// A new store on a fresh PostgreSQL database, if a server is available.
pub async fn postgres() -> Option<TestStore> {
    let server = postgres_server()?;
    let url = postgres_database(&server).await;
    let store = Store::open(StoreOptions::new(Location::Postgres(Secret::new(url))))
        .await
        .unwrap();
    Some(TestStore { store, dir: None })
}

/// Every backend to run a test body against: SQLite always, PostgreSQL when available.
pub async fn every_backend() -> Vec<TestStore> {
    let mut all = vec![sqlite().await];
    all.extend(postgres().await);
    assert_eq!(all[0].store.backend(), Backend::Sqlite);
    all
}
