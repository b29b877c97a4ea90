//! What a check costs, measured rather than guessed: every built-in detector (all 15 entities,
//! masking) over clean prose and over prose with values to mask, and the injection score.
//! `cargo test --release -p sluice-guardrails --test timing -- --ignored --nocapture`;
//! ignored by default because timings mean nothing in a debug build. docs/guardrails.md
//! quotes what it printed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use sluice_guardrails::{
    Action, Entity, Guardrail, Kind, Masks, Modes, Settings, SpecSettings, Tally,
};

fn guardrail(kind: Kind, entities: Vec<(Entity, Action)>) -> Guardrail {
    Guardrail::build(Settings {
        name: "t".into(),
        kind,
        modes: Modes {
            pre_call: true,
            ..Modes::default()
        },
        default_on: true,
        output_parse_pii: false,
        spec: SpecSettings {
            entities,
            ..SpecSettings::default()
        },
        threshold: 0.8,
        tools: sluice_guardrails::ToolSettings::default(),
        size: sluice_guardrails::SizeLimits::default(),
        external: None,
    })
    .unwrap()
}

const PROSE: &str = "The sluice gate controls the flow of water from the reservoir into the \
    channel below. Operators open it in the morning, watch the level through the day and close \
    it when the evening demand falls. Maintenance happens twice a year, in spring and autumn. ";

fn time(label: &str, g: &Guardrail, text: &str) {
    let (mut masks, mut tally, mut scratch) = (Masks::default(), Tally::default(), Vec::new());
    for _ in 0..100 {
        let _ = g.check(text, &mut masks, &mut tally, &mut scratch);
    }
    let n = 2_000;
    let start = Instant::now();
    for _ in 0..n {
        masks = Masks::default();
        let _ = std::hint::black_box(g.check(text, &mut masks, &mut tally, &mut scratch));
    }
    let per = start.elapsed() / n;
    eprintln!(
        "{label:<44} {:>7} bytes {:>9.2} µs",
        text.len(),
        per.as_secs_f64() * 1e6
    );
}

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn check_costs() {
    let all = guardrail(
        Kind::ContentFilter,
        Entity::ALL.iter().map(|e| (*e, Action::Mask)).collect(),
    );
    let secrets = guardrail(
        Kind::HideSecrets,
        Entity::SECRETS.iter().map(|e| (*e, Action::Mask)).collect(),
    );
    let injection = guardrail(Kind::PromptInjection, Vec::new());
    let short = "What is a sluice gate, and how does it work?";
    let prose_2k: String = PROSE.repeat(8);
    let prose_100k: String = PROSE.repeat(400);
    let dirty_2k = format!(
        "{prose_2k} Mail jane.doe@example.com, card 4111 1111 1111 1111, call (415) 555-2671."
    );
    time("all 15 detectors, short question", &all, short);
    time("all 15 detectors, clean prose", &all, &prose_2k);
    time("all 15 detectors, clean prose", &all, &prose_100k);
    time("all 15 detectors, prose + 3 values masked", &all, &dirty_2k);
    // Accented prose: a Unicode word boundary would stop the lazy DFA at the first non-ASCII
    // byte; the patterns' ASCII boundaries keep it on the fast path.
    let accented = "Le déversoir règle le débit de l'eau vers le canal en aval. ".repeat(34);
    time("all 15 detectors, accented prose", &all, &accented);
    let pii = guardrail(
        Kind::ContentFilter,
        [
            Entity::EmailAddress,
            Entity::PhoneNumber,
            Entity::CreditCard,
            Entity::IbanCode,
            Entity::UsSsn,
            Entity::IpAddress,
        ]
        .iter()
        .map(|e| (*e, Action::Mask))
        .collect(),
    );
    time(
        "sluice bench's PII set (6), prose + 3 masked",
        &pii,
        &dirty_2k,
    );
    // Runs that match a pattern and fail its check, over and over: a 100 KB base64 blob (too
    // long to be a secret), and digits in card-like groups that fail Luhn.
    let blob: String = (0..100_000u32)
        .map(|i| char::from(b"Zx8vQ2mLp9RtY4kWc7NbH3jFs6DgA1eU+/"[(i * 7 % 34) as usize]))
        .collect();
    time("all 15 detectors, 100 KB base64 blob", &all, &blob);
    let digits = "4111 1111 1111 1112 ".repeat(100);
    time("all 15 detectors, failing card numbers", &all, &digits);
    time(
        "hide-secrets (9 detectors), clean prose",
        &secrets,
        &prose_2k,
    );
    time("prompt_injection, clean prose", &injection, &prose_2k);
    time("prompt_injection, clean prose", &injection, &prose_100k);
}
