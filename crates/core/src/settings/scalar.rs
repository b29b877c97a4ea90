//! A configuration leaf as written: YAML users write `rpm: "100"` and environment references
//! always yield strings, so every leaf is read loosely and checked where it is used.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A YAML leaf: string, number or boolean.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A string.
    Str(String),
    /// A whole number.
    Int(i128),
    /// A number with a fraction.
    Float(f64),
    /// `true` / `false`.
    Bool(bool),
}

impl Scalar {
    /// The value as text (numbers and booleans printed as YAML would).
    pub fn text(&self) -> String {
        match self {
            Self::Str(s) => s.clone(),
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Bool(b) => b.to_string(),
        }
    }

    /// The value as a number, if it is one or a string holding one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Self::Int(i) => Some(*i as f64),
            Self::Float(f) => Some(*f),
            Self::Str(s) => s.trim().parse().ok(),
            Self::Bool(_) => None,
        }
    }

    /// The value as a whole number, if it is one or a string holding one.
    pub fn integer(&self) -> Option<i128> {
        match self {
            Self::Int(i) => Some(*i),
            Self::Float(f) if f.fract() == 0.0 && f.abs() < 1e18 => Some(*f as i128),
            Self::Str(s) => s.trim().parse().ok(),
            Self::Float(_) | Self::Bool(_) => None,
        }
    }

    /// The value as a boolean (`true`, `"true"`, `"True"`, `1`...).
    pub fn boolean(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            Self::Int(0) => Some(false),
            Self::Int(1) => Some(true),
            Self::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "on" => Some(true),
                "false" | "no" | "0" | "off" => Some(false),
                _ => None,
            },
            Self::Int(_) | Self::Float(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
        }
        d.deserialize_any(V)
    }
}
