//! Test databases: a fresh SQLite file, and a fresh database on the PostgreSQL server named by
//! `SLUICE_TEST_POSTGRES_URL` (scripts/services.sh starts one). Without that variable the
//! PostgreSQL half is skipped with a printed reason, except under `CI=true`, where a missing
//! server fails the test instead of passing silently. Compiled for this crate's tests and,
//! with the `testing` feature, for the admin API's.

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

/// A test variable's value, or `None` (with the reason printed) when tests may skip it; under
/// `CI=true` a missing server fails the test instead of passing silently.
pub fn required_var(name: &str, what: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{name} is not set under CI=true: run the tests through scripts/test.sh")
        }
        _ => {
            eprintln!(
                "skipping {what}: {name} is not set (scripts/test.sh starts a server and sets it)"
            );
            None
        }
    }
}

/// The test server's URL, or `None` (with the reason printed) when tests may skip it.
pub fn postgres_server() -> Option<String> {
    required_var(POSTGRES_ENV, "the PostgreSQL half")
}

/// The restartable server's URL and control script.
pub fn postgres_restartable() -> Option<(String, String)> {
    let what = "the PostgreSQL outage test";
    Some((
        required_var(RESTART_ENV[0], what)?,
        required_var(RESTART_ENV[1], what)?,
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
