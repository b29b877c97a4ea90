//! The kinds of sensitive value the built-in detectors find, under LiteLLM's names: Presidio's
//! entity names for PII (`EMAIL_ADDRESS`, `CREDIT_CARD`, ...), so that a `pii_entities_config`
//! written for LiteLLM reads the same here, and one name per kind of secret.

use std::fmt;

/// One kind of sensitive value. The order is the detectors' priority when two matches start at
/// the same place and have the same length (a `sk-ant-` key is Anthropic's, not OpenAI's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entity {
    /// A PEM private key block (`-----BEGIN ... PRIVATE KEY-----` ... `END`).
    PrivateKey,
    /// A JSON Web Token (`eyJ...`.`eyJ...`.signature).
    Jwt,
    /// An Anthropic API key (`sk-ant-...`).
    AnthropicApiKey,
    /// An OpenAI API key (`sk-...`, `sk-proj-...`).
    OpenAiApiKey,
    /// An AWS access key id (`AKIA...`, `ASIA...`).
    AwsAccessKey,
    /// A GitHub token (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`).
    GithubToken,
    /// A Slack token (`xoxb-`, `xoxp-`, ...).
    SlackToken,
    /// A Google API key (`AIza...`).
    GoogleApiKey,
    /// A long random-looking token none of the named detectors claims.
    HighEntropySecret,
    /// A payment card number (13–19 digits passing Luhn's check).
    CreditCard,
    /// An international bank account number (its mod-97 check passes).
    IbanCode,
    /// A US social security number (`123-45-6789`, with the SSA's format rules).
    UsSsn,
    /// An e-mail address.
    EmailAddress,
    /// A phone number (North American, or international with a `+` prefix).
    PhoneNumber,
    /// An IPv4 or IPv6 address.
    IpAddress,
}

impl Entity {
    /// Every entity, in priority order.
    pub const ALL: [Entity; 15] = [
        Entity::PrivateKey,
        Entity::Jwt,
        Entity::AnthropicApiKey,
        Entity::OpenAiApiKey,
        Entity::AwsAccessKey,
        Entity::GithubToken,
        Entity::SlackToken,
        Entity::GoogleApiKey,
        Entity::HighEntropySecret,
        Entity::CreditCard,
        Entity::IbanCode,
        Entity::UsSsn,
        Entity::EmailAddress,
        Entity::PhoneNumber,
        Entity::IpAddress,
    ];

    /// The secrets (the first nine of [`Entity::ALL`]), which `hide-secrets` masks unless told
    /// otherwise.
    pub const SECRETS: &'static [Entity] = Entity::ALL.split_at(9).0;

    /// The name config files, placeholders, records and metrics use.
    pub fn name(self) -> &'static str {
        match self {
            Entity::PrivateKey => "PRIVATE_KEY",
            Entity::Jwt => "JWT",
            Entity::AnthropicApiKey => "ANTHROPIC_API_KEY",
            Entity::OpenAiApiKey => "OPENAI_API_KEY",
            Entity::AwsAccessKey => "AWS_ACCESS_KEY",
            Entity::GithubToken => "GITHUB_TOKEN",
            Entity::SlackToken => "SLACK_TOKEN",
            Entity::GoogleApiKey => "GOOGLE_API_KEY",
            Entity::HighEntropySecret => "HIGH_ENTROPY_SECRET",
            Entity::CreditCard => "CREDIT_CARD",
            Entity::IbanCode => "IBAN_CODE",
            Entity::UsSsn => "US_SSN",
            Entity::EmailAddress => "EMAIL_ADDRESS",
            Entity::PhoneNumber => "PHONE_NUMBER",
            Entity::IpAddress => "IP_ADDRESS",
        }
    }

    /// The entity a config names, if sluice detects it.
    pub fn from_name(name: &str) -> Option<Entity> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether it is a secret (as opposed to personal data).
    pub fn is_secret(self) -> bool {
        Self::SECRETS.contains(&self)
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Presidio entity names sluice does not detect in process (they need a language model or a
/// dictionary): a config naming one gets an error that says so, not a silent pass.
pub const PRESIDIO_NOT_BUILT_IN: &[&str] = &[
    "PERSON",
    "LOCATION",
    "NRP",
    "DATE_TIME",
    "MEDICAL_LICENSE",
    "URL",
    "CRYPTO",
    "US_BANK_NUMBER",
    "US_DRIVER_LICENSE",
    "US_ITIN",
    "US_PASSPORT",
    "UK_NHS",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for e in Entity::ALL {
            assert_eq!(Entity::from_name(e.name()), Some(e));
        }
        assert_eq!(Entity::from_name("email_address"), None);
        assert!(Entity::OpenAiApiKey.is_secret());
        assert!(!Entity::CreditCard.is_secret());
        assert!(Entity::SECRETS.contains(&Entity::HighEntropySecret));
        assert!(!Entity::SECRETS.contains(&Entity::CreditCard));
    }
}
