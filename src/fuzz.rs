//! The fuzz targets over what this crate reads from outside (fuzz/README.md): admin API
//! bodies and query strings, and the fleet's Redis messages. `fuzz/fuzz_targets/*.rs` call
//! them under libFuzzer; the tests below replay the checked-in corpus through them on stable.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use http::Method;

use sluice_store::{Location, Store, StoreOptions};

use crate::admin::handle;
use crate::fleet::{decode_cooldown, KeyChange};

/// Every admin route, each with the method it is served on.
const ADMIN_ROUTES: &[(Method, &str)] = &[
    (Method::POST, "/key/generate"),
    (Method::POST, "/key/update"),
    (Method::POST, "/key/delete"),
    (Method::POST, "/key/regenerate"),
    (Method::POST, "/key/block"),
    (Method::POST, "/key/unblock"),
    (Method::POST, "/team/new"),
    (Method::POST, "/team/update"),
    (Method::POST, "/team/delete"),
    (Method::POST, "/user/new"),
    (Method::POST, "/user/update"),
    (Method::POST, "/user/delete"),
    (Method::POST, "/customer/new"),
    (Method::POST, "/customer/update"),
    (Method::POST, "/customer/delete"),
    (Method::POST, "/customer/block"),
    (Method::POST, "/customer/unblock"),
    (Method::GET, "/key/info"),
    (Method::GET, "/key/list"),
    (Method::GET, "/team/info"),
    (Method::GET, "/team/list"),
    (Method::GET, "/user/info"),
    (Method::GET, "/user/list"),
    (Method::GET, "/customer/info"),
    (Method::GET, "/customer/list"),
    (Method::GET, "/spend/logs"),
    (Method::GET, "/spend/daily"),
    (Method::POST, "/budget/new"),
    (Method::POST, "/budget/update"),
    (Method::POST, "/budget/info"),
    (Method::POST, "/budget/delete"),
    (Method::GET, "/budget/list"),
    (Method::POST, "/organization/new"),
    (Method::PATCH, "/organization/update"),
    (Method::DELETE, "/organization/delete"),
    (Method::GET, "/organization/info"),
    (Method::POST, "/organization/info"),
    (Method::GET, "/organization/list"),
    (Method::POST, "/organization/member_add"),
    (Method::PATCH, "/organization/member_update"),
    (Method::DELETE, "/organization/member_delete"),
    (Method::POST, "/tag/new"),
    (Method::POST, "/tag/update"),
    (Method::POST, "/tag/info"),
    (Method::POST, "/tag/delete"),
    (Method::GET, "/tag/list"),
];

/// The admin target's store folder: in /dev/shm (memory) when there is one, one per process.
fn admin_dir() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    let base = if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    };
    base.join(format!("sluice-fuzz-admin-{}", std::process::id()))
}

/// One SQLite store for the process (in memory-backed /dev/shm when there is one), and the
/// runtime its calls run on: libFuzzer calls the target millions of times in one process.
fn admin_store() -> &'static (tokio::runtime::Runtime, Store) {
    static STORE: OnceLock<(tokio::runtime::Runtime, Store)> = OnceLock::new();
    STORE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let dir = admin_dir();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a folder for the store");
        let mut options = StoreOptions::new(Location::Sqlite(dir.join("sluice.db")));
        options.max_connections = 1;
        options.acquire_timeout = Duration::from_secs(30);
        let store = rt.block_on(Store::open(options)).expect("the store opens");
        (rt, store)
    })
}

/// The admin API. Byte 0 picks the route; the rest is its body (POST) or query string (GET).
/// Whatever a client sends, the answer is JSON or a client error (4xx) naming the problem:
/// never a server error, which would mean a body reached the database unchecked.
pub fn admin_body(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let (method, path) = &ADMIN_ROUTES[usize::from(pick) % ADMIN_ROUTES.len()];
    let query = String::from_utf8_lossy(rest);
    let (query, body) = if *method == Method::GET {
        (&*query, &[][..])
    } else {
        ("", rest)
    };
    let (rt, store) = admin_store();
    match rt.block_on(handle(store, method, path, query, body)) {
        Some(Ok(answer)) => assert!(answer.is_object() || answer.is_array()),
        Some(Err(e)) => assert!(
            e.status().is_client_error(),
            "{method} {path}: {e} ({})",
            e.status()
        ),
        None => panic!("{path} is an admin route"),
    }
}

/// The fleet's Redis messages: key changes (a key's digest) and cooldowns
/// (`instance|deployment|ms`). A key change reads only from 64 hex digits and writes back as
/// them; a cooldown is read only from another instance, is at most an hour, and reads back
/// the same from what it says.
pub fn fleet_messages(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Some(change) = KeyChange::decode(&text) {
        assert_eq!(change.encode(), text.to_ascii_lowercase());
        assert_eq!(KeyChange::decode(change.encode()), Some(change.clone()));
    }
    let me = 7;
    if let Some((id, span)) = decode_cooldown(&text, me) {
        assert!(span <= Duration::from_secs(3600));
        let from: u64 = text
            .split('|')
            .next()
            .and_then(|f| f.parse().ok())
            .expect("a cooldown names its instance");
        assert_ne!(from, me);
        let again = format!("{from}|{id}|{}", span.as_millis());
        assert_eq!(decode_cooldown(&again, me), Some((id, span)));
        assert_eq!(
            decode_cooldown(&again, from),
            None,
            "an instance's own news is ignored"
        );
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::fuzz::replay;

    const HERE: &str = env!("CARGO_MANIFEST_DIR");

    #[test]
    fn admin_body_corpus() {
        replay(HERE, "admin_body", super::admin_body);
        let _ = std::fs::remove_dir_all(super::admin_dir());
    }

    #[test]
    fn fleet_messages_corpus() {
        replay(HERE, "fleet_messages", super::fleet_messages);
    }
}
