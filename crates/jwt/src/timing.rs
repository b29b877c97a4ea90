//! What a verification costs, measured rather than guessed: a cached token through
//! [`crate::Keys::verify`], and uncached RS256, PS256, ES256, ES384 and EdDSA through
//! [`crate::verify`]. Ignored by default because timings mean nothing in a debug build:
//! `cargo test --release -p sluice-jwt timing -- --ignored --nocapture --test-threads=1`.
//! Prints numbers and asserts none: wall-clock bounds make flaky tests.

use std::hint::black_box;
use std::time::Instant;

use serde_json::{json, Value};

use crate::cache::TokenDigest;
use crate::test_keys::Signer;
use crate::{verify, KeySettings, Keys, Validation};

const NOW: u64 = 1_800_000_000;

/// An access token shaped like an IdP's (Entra ID, Okta): a dozen claims, about 1 KB encoded.
fn claims() -> Value {
    json!({
        "iss": "https://login.example.com/4f1c1d2e-0000-4000-8000-000000000000/v2.0",
        "aud": ["sluice", "api://gateway"],
        "sub": "AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ",
        "exp": NOW + 3600, "nbf": NOW - 60, "iat": NOW - 60,
        "azp": "0b5e8a2c-1111-4222-8333-444455556666",
        "oid": "00000000-0000-0000-66f3-3332eca7ea81",
        "tid": "4f1c1d2e-0000-4000-8000-000000000000",
        "name": "Ada Lovelace", "preferred_username": "ada@example.com",
        "email": "ada@example.com",
        "scope": "litellm.api.consumer openid profile email",
        "roles": ["litellm_proxy_admin", "team-research"],
        "groups": ["c1a2b3c4-d5e6-47f8-9a0b-1c2d3e4f5a6b", "d1a2b3c4-d5e6-47f8-9a0b-1c2d3e4f5a6b"],
        "team_id": "research",
        "uti": "AbCdEfGhIjKlMnOpQrStUv", "ver": "2.0"
    })
}

fn per_call(label: &str, iterations: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..iterations / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(iterations);
    println!("{label:<44} {:>10.0} ns/call ({:.2} µs)", ns, ns / 1000.0);
    ns
}

#[test]
#[ignore = "timing: run in release with --ignored --nocapture"]
fn timing() {
    let ec = Signer::ec();
    let rsa = Signer::rsa();
    let p384 = Signer::p384();
    let ed = Signer::ed25519();
    let set = Signer::set(&[&ec, &rsa, &p384, &ed]);
    let rules = Validation {
        audiences: vec!["sluice".into()],
        issuer: Some("https://login.example.com/4f1c1d2e-0000-4000-8000-000000000000/v2.0".into()),
        ..Validation::default()
    };
    let keys = Keys::new(rules.clone(), KeySettings::default());
    keys.install(&Signer::set_body(&[&ec, &rsa, &p384, &ed]), NOW)
        .unwrap();

    let es256 = ec.sign(&claims());
    let rs256 = rsa.sign(&claims());
    let ps256 = rsa.sign_as("PS256", &claims());
    let es384 = p384.sign(&claims());
    let eddsa = ed.sign(&claims());
    println!(
        "token sizes: ES256 {} B, RS256 {} B",
        es256.len(),
        rs256.len()
    );

    for (name, t) in [("ES256", &es256), ("RS256", &rs256)] {
        keys.verify(t, NOW).unwrap();
        per_call(
            &format!("cached Keys::verify ({name} token)"),
            1_000_000,
            || {
                black_box(keys.verify(black_box(t), NOW).unwrap());
            },
        );
        per_call(
            &format!("  of which SHA-256 ({name} token)"),
            1_000_000,
            || {
                black_box(TokenDigest::of(black_box(t)));
            },
        );
    }
    for (name, t) in [
        ("RS256", &rs256),
        ("PS256", &ps256),
        ("ES256", &es256),
        ("ES384", &es384),
        ("EdDSA", &eddsa),
    ] {
        verify(t, &set, &rules, NOW).unwrap();
        per_call(&format!("uncached verify {name}"), 5_000, || {
            black_box(verify(black_box(t), &set, &rules, NOW).unwrap());
        });
    }

    // Two threads on the same cached token (the machine this was written on has 2 CPUs).
    let start = Instant::now();
    let n = 1_000_000u32;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..n {
                    black_box(keys.verify(black_box(&es256), NOW).unwrap());
                }
            });
        }
    });
    let ns = start.elapsed().as_nanos() as f64 / f64::from(n);
    println!("cached, 2 threads at once (per call, each)  {ns:>10.0} ns/call");
}
