//! Loading: text → YAML tree → `include:` merged → `environment_variables:` applied →
//! references resolved → typed (unknown keys become warnings) → validated [`Config`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};

use sluice_core::settings::{did_you_mean, Env, Problems, Scalar, Warning};

use super::env::{key_text, resolve_tree, Layered, OS_ENVIRON};
use super::model::Config;
use super::problems::ConfigError;
use super::raw::{
    RawConfig, BLOCKED_WORD_KEYS, CACHE_PARAMS_KEYS, CALLBACK_KEYS, GENERAL_KEYS, GUARDRAIL_KEYS,
    GUARDRAIL_PARAM_KEYS, LITELLM_KEYS, MCP_SERVER_KEYS, MODEL_KEYS, PATTERN_KEYS, ROUTER_KEYS,
    TOOL_RULE_KEYS, TOP_KEYS,
};
use super::validate::secrets::key_management;
use super::validate::validate;

/// A loaded config and what the user should be told about it.
#[derive(Debug)]
pub struct Loaded {
    /// The validated config.
    pub config: Config,
    /// Ignored keys, unset variables, defaults taken: log them at startup.
    pub warnings: Vec<Warning>,
}

/// Load a config from YAML text (no `include:`; paths in it would have nothing to be relative to).
pub fn load_str(yaml: &str, env: &dyn Env) -> Result<Loaded, ConfigError> {
    Source::from_yaml(yaml)?.load(&[], env)
}

/// Load a config file, with the files it `include:`s (relative to its folder).
pub fn load_file(path: &Path, env: &dyn Env) -> Result<Loaded, ConfigError> {
    Source::from_file(path)?.load(&[], env)
}

/// A config as read (its `include:`s merged) but not yet resolved or typed: kept by a gateway
/// whose deployments also live in the database (`store_model_in_db`), so that each change to
/// them loads the file's config again with them appended, through the same validation.
#[derive(Debug, Clone)]
pub struct Source {
    root: Value,
    /// Problems found while merging includes, reported with the rest by [`Source::load`].
    problems: Vec<sluice_core::settings::Invalid>,
}

impl Source {
    /// Read YAML text (no `include:`).
    pub fn from_yaml(yaml: &str) -> Result<Self, ConfigError> {
        let mut root = parse(yaml, None)?;
        let mut problems = Problems::default();
        if take(&mut root, "include").is_some() {
            problems.error(
                "include",
                "only a config loaded from a file can include others",
            );
        }
        Ok(Self {
            root,
            problems: problems.errors,
        })
    }

    /// Read a config file and the files it `include:`s (relative to its folder).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let mut root = parse(&read(path)?, Some(path))?;
        let mut problems = Problems::default();
        merge_includes(&mut root, path, &mut problems)?;
        Ok(Self {
            root,
            problems: problems.errors,
        })
    }

    /// How many `model_list` entries the file itself has: `extra` entries of [`Source::load`]
    /// are numbered from here in its problems' paths.
    pub fn file_models(&self) -> usize {
        match self.root.get("model_list") {
            Some(Value::Sequence(s)) => s.len(),
            _ => 0,
        }
    }

    /// The secret manager `general_settings.key_management_system` names, with its
    /// `key_management_settings`, resolved against `env` alone: read before the rest of the
    /// config, whose `os.environ/` references the manager then answers.
    pub fn key_management(
        &self,
        env: &dyn Env,
    ) -> Result<Option<sluice_secrets::Settings>, ConfigError> {
        let mut problems = Problems::default();
        let general = self.root.get("general_settings");
        let mut member = |key: &str| -> Option<Value> {
            let mut v = general?.get(key)?.clone();
            resolve_tree(
                &mut v,
                &format!("general_settings.{key}"),
                env,
                &mut problems,
            );
            Some(v)
        };
        let system = member("key_management_system");
        let settings = member("key_management_settings");
        let system = match system.map(serde_yaml_ng::from_value::<Scalar>) {
            None => None,
            Some(Ok(s)) => Some(s),
            Some(Err(_)) => {
                problems.error(
                    "general_settings.key_management_system",
                    "expected a string",
                );
                None
            }
        };
        let settings = settings.and_then(|v| serde_json::to_value(v).ok());
        let out = key_management(system, settings, &mut problems);
        if problems.errors.is_empty() {
            Ok(out)
        } else {
            Err(ConfigError::Invalid(problems.errors))
        }
    }

    /// Every variable named by an `os.environ/NAME` value anywhere in the config: what a
    /// secret manager is asked for.
    pub fn referenced_names(&self) -> Vec<String> {
        fn walk(v: &Value, out: &mut std::collections::BTreeSet<String>) {
            match v {
                Value::String(s) => {
                    if let Some(name) = s.strip_prefix(OS_ENVIRON) {
                        let name = name.trim();
                        if !name.is_empty() {
                            out.insert(name.to_owned());
                        }
                    }
                }
                Value::Sequence(items) => items.iter().for_each(|i| walk(i, out)),
                Value::Mapping(m) => m.values().for_each(|i| walk(i, out)),
                Value::Tagged(t) => walk(&t.value, out),
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        let mut out = std::collections::BTreeSet::new();
        walk(&self.root, &mut out);
        out.into_iter().collect()
    }

    /// Resolve, type and validate the config with `extra` entries (each a `model_list` entry:
    /// `model_name`, `litellm_params`, `model_info`) appended to its `model_list`.
    pub fn load(&self, extra: &[serde_json::Value], env: &dyn Env) -> Result<Loaded, ConfigError> {
        let mut root = self.root.clone();
        let mut problems = Problems {
            errors: self.problems.clone(),
            ..Problems::default()
        };
        if !extra.is_empty() {
            let mut entries = Vec::with_capacity(extra.len());
            for (i, e) in extra.iter().enumerate() {
                match serde_yaml_ng::to_value(e) {
                    Ok(v) => entries.push(v),
                    Err(err) => problems.error(
                        format!("model_list[{}]", self.file_models() + i),
                        err.to_string(),
                    ),
                }
            }
            if let Value::Mapping(map) = &mut root {
                let slot = map
                    .entry(Value::String("model_list".into()))
                    .or_insert_with(|| Value::Sequence(Vec::new()));
                match slot {
                    Value::Sequence(s) => s.extend(entries),
                    Value::Null => *slot = Value::Sequence(entries),
                    // A file whose model_list is not a list fails on its own below.
                    _ => {}
                }
            }
        }
        finish(root, env, problems)
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })
}

fn parse(text: &str, file: Option<&Path>) -> Result<Value, ConfigError> {
    let value: Value = serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Syntax {
        file: file.map(|f| f.display().to_string()),
        message: e.to_string(),
    })?;
    match value {
        Value::Mapping(_) => Ok(value),
        Value::Null => Ok(Value::Mapping(Mapping::new())),
        _ => Err(ConfigError::Invalid(vec![sluice_core::settings::Invalid {
            path: String::new(),
            message: "the config must be a YAML mapping (model_list:, general_settings:, ...)"
                .into(),
        }])),
    }
}

/// LiteLLM's `include:`: each listed file's `model_list` is appended to this one's; any other
/// top-level section it has is taken when this file lacks it.
fn merge_includes(
    root: &mut Value,
    path: &Path,
    problems: &mut Problems,
) -> Result<(), ConfigError> {
    let Some(list) = take(root, "include") else {
        return Ok(());
    };
    let Value::Sequence(files) = list else {
        problems.error("include", "expected a list of file names");
        return Ok(());
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    for (i, f) in files.iter().enumerate() {
        let Some(name) = f.as_str() else {
            problems.error(format!("include[{i}]"), "expected a file name");
            continue;
        };
        let file: PathBuf = dir.join(name);
        let included = parse(&read(&file)?, Some(&file))?;
        if included.get("include").is_some() {
            problems.error(
                format!("include[{i}]"),
                format!("{name} has its own include:, which is not supported"),
            );
        }
        let Value::Mapping(included) = included else {
            continue;
        };
        let Value::Mapping(root_map) = root else {
            continue;
        };
        for (k, v) in included {
            if k.as_str() == Some("model_list") {
                let entries = match v {
                    Value::Sequence(s) => s,
                    Value::Null => Vec::new(),
                    _ => {
                        problems.error(
                            format!("include[{i}]"),
                            format!("{name}: model_list must be a list"),
                        );
                        continue;
                    }
                };
                let slot = root_map
                    .entry(Value::String("model_list".into()))
                    .or_insert_with(|| Value::Sequence(Vec::new()));
                match slot {
                    Value::Sequence(s) => s.extend(entries),
                    Value::Null => *slot = Value::Sequence(entries),
                    _ => {}
                }
            } else if k.as_str() == Some("guardrails") {
                // Guardrails are a list too: an included file's come after the main file's.
                match (root_map.get_mut(&k), v) {
                    (Some(Value::Sequence(s)), Value::Sequence(more)) => s.extend(more),
                    (None | Some(Value::Null), v) => {
                        root_map.insert(k, v);
                    }
                    _ => problems.error(
                        format!("include[{i}]"),
                        format!("{name}: guardrails must be a list"),
                    ),
                }
            } else if k.as_str() == Some("mcp_servers") {
                // MCP servers are named: an included file adds servers, and may not redefine one.
                match (root_map.get_mut(&k), v) {
                    (Some(Value::Mapping(m)), Value::Mapping(more)) => {
                        for (server, entry) in more {
                            if m.contains_key(&server) {
                                problems.error(
                                    format!("include[{i}]"),
                                    format!(
                                        "{name}: mcp_servers.{} is also defined in the including file",
                                        server.as_str().unwrap_or("?")
                                    ),
                                );
                            } else {
                                m.insert(server, entry);
                            }
                        }
                    }
                    (None | Some(Value::Null), v) => {
                        root_map.insert(k, v);
                    }
                    _ => problems.error(
                        format!("include[{i}]"),
                        format!("{name}: mcp_servers must be a mapping of names"),
                    ),
                }
            } else if !root_map.contains_key(&k) {
                root_map.insert(k, v);
            }
        }
    }
    Ok(())
}

fn finish(mut root: Value, env: &dyn Env, mut problems: Problems) -> Result<Loaded, ConfigError> {
    let over = environment_variables(&mut root, env, &mut problems);
    let layered = Layered { over, base: env };
    resolve_tree(&mut root, "", &layered, &mut problems);

    let mut ignored = Vec::new();
    let mut on_ignored = |p: serde_ignored::Path<'_>| ignored.push(segments(&p));
    let de = serde_ignored::Deserializer::new(root, &mut on_ignored);
    let raw: Result<RawConfig, _> = serde_path_to_error::deserialize(de);
    let raw = match raw {
        Ok(r) => r,
        Err(e) => {
            let path = e.path().to_string();
            problems.error(
                if path == "." { String::new() } else { path },
                e.into_inner().to_string(),
            );
            return Err(ConfigError::Invalid(problems.errors));
        }
    };
    for segs in ignored {
        warn_ignored(&segs, &mut problems);
    }
    let config = validate(raw, &layered, &mut problems);
    if problems.errors.is_empty() {
        Ok(Loaded {
            config,
            warnings: problems.warnings,
        })
    } else {
        Err(ConfigError::Invalid(problems.errors))
    }
}

/// Remove a top-level section that loading itself handles, so typing never sees it.
fn take(root: &mut Value, key: &str) -> Option<Value> {
    root.as_mapping_mut()?.remove(key)
}

/// Take `environment_variables:` out of the tree, resolved against the real environment.
fn environment_variables(
    root: &mut Value,
    env: &dyn Env,
    problems: &mut Problems,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(mut v) = take(root, "environment_variables") else {
        return out;
    };
    resolve_tree(&mut v, "environment_variables", env, problems);
    match v {
        Value::Mapping(m) => {
            for (k, v) in m.iter() {
                let key = key_text(k);
                match v {
                    Value::String(s) => {
                        out.insert(key, s.clone());
                    }
                    Value::Number(n) => {
                        out.insert(key, n.to_string());
                    }
                    Value::Bool(b) => {
                        out.insert(key, b.to_string());
                    }
                    Value::Null => {}
                    _ => problems.error(
                        format!("environment_variables.{key}"),
                        "expected a string, number or boolean",
                    ),
                }
            }
        }
        Value::Null => {}
        _ => problems.error(
            "environment_variables",
            "expected a mapping of variable names to values",
        ),
    }
    out
}

/// A path segment of an ignored key.
enum Seg {
    Key(String),
    Index(usize),
}

fn segments(p: &serde_ignored::Path<'_>) -> Vec<Seg> {
    use serde_ignored::Path as P;
    let mut out = match p {
        P::Root => return Vec::new(),
        P::Seq { parent, .. }
        | P::Map { parent, .. }
        | P::Some { parent }
        | P::NewtypeStruct { parent }
        | P::NewtypeVariant { parent } => segments(parent),
    };
    match p {
        P::Seq { index, .. } => out.push(Seg::Index(*index)),
        P::Map { key, .. } => out.push(Seg::Key(key.clone())),
        _ => {}
    }
    out
}

fn warn_ignored(segs: &[Seg], problems: &mut Problems) {
    let mut path = String::new();
    for s in segs {
        match s {
            Seg::Key(k) if path.is_empty() => path.push_str(k),
            Seg::Key(k) => {
                path.push('.');
                path.push_str(k);
            }
            Seg::Index(i) => path.push_str(&format!("[{i}]")),
        }
    }
    let keys: Vec<&str> = segs
        .iter()
        .filter_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        })
        .collect();
    let known: &[&str] = match keys.as_slice() {
        [_] => TOP_KEYS,
        ["model_list", _] => MODEL_KEYS,
        ["general_settings", _] => GENERAL_KEYS,
        ["router_settings", _] => ROUTER_KEYS,
        ["litellm_settings", _] => LITELLM_KEYS,
        ["litellm_settings", "cache_params", _] => CACHE_PARAMS_KEYS,
        ["mcp_servers", _, _] => MCP_SERVER_KEYS,
        ["guardrails", _] => GUARDRAIL_KEYS,
        ["guardrails", "litellm_params", _] => GUARDRAIL_PARAM_KEYS,
        ["guardrails", "litellm_params", "patterns", _] => PATTERN_KEYS,
        ["guardrails", "litellm_params", "blocked_words", _] => BLOCKED_WORD_KEYS,
        ["guardrails", "litellm_params", "rules", _] => TOOL_RULE_KEYS,
        ["callback_settings", _, _] | ["litellm_settings", "s3_callback_params", _] => {
            CALLBACK_KEYS
        }
        _ => &[],
    };
    let last = keys.last().copied().unwrap_or_default();
    problems.warn(
        path,
        format!(
            "not used by sluice; ignored{}",
            did_you_mean(last, known.iter().copied())
        ),
    );
}
