//! `litellm_settings.cache` and `cache_params`, validated: which calls are cached, for how
//! long, how much memory the store may hold, and whether identical requests in flight are
//! collapsed.

use std::time::Duration;

use sluice_core::endpoint::Endpoint;
use sluice_core::RedisTarget;

/// Where answers are stored. The config refuses LiteLLM's other types by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheType {
    /// LiteLLM's `local`: this instance's memory.
    Local,
    /// LiteLLM's `redis`: a Redis the fleet shares, with this instance's memory in front.
    Redis(RedisCache),
}

/// The shared store's settings (`type: redis`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisCache {
    /// Where it is: one server, a Cluster, or a primary Sentinel names (passwords inside).
    pub target: RedisTarget,
    /// Longest a lookup waits for Redis before it counts as a miss (`socket_timeout`).
    pub timeout: Duration,
    /// Longest an answer read from Redis stays in this instance's memory
    /// (`default_in_memory_ttl`); never longer than it has left in Redis.
    pub memory_ttl: Option<Duration>,
}

/// How long a lookup waits for the shared store unless `socket_timeout` says otherwise: a
/// Redis this slow costs more than the answer it might hold saves.
pub const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(100);

/// The cache's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSettings {
    /// The store's type, and the shared store's settings.
    pub kind: CacheType,
    /// Whether answers are stored at all (`cache: true`); `false` with `dedupe` alone.
    pub store: bool,
    /// How long an answer is kept unless the request says otherwise (in Redis too:
    /// `default_in_redis_ttl` when given).
    pub ttl: Duration,
    /// A prefix of every key: instances with different namespaces never share answers.
    pub namespace: Option<String>,
    /// The endpoints whose answers are cached.
    pub call_types: Vec<Endpoint>,
    /// LiteLLM's `mode: default_off`: only requests that ask (`cache: {"use-cache": true}`)
    /// use the cache.
    pub default_off: bool,
    /// The most bytes of answers the in-process store holds.
    pub max_bytes: u64,
    /// Collapse identical requests in flight into one upstream call.
    pub dedupe: bool,
    /// A semantic cache (`type: redis-semantic`, `local-semantic`): a prompt close enough
    /// to a stored one is answered with that one's answer.
    pub semantic: Option<SemanticSettings>,
}

/// What a semantic cache compares and where its index lives.
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticSettings {
    /// The least cosine similarity of a hit (`similarity_threshold`, 0..=1).
    pub threshold: f32,
    /// The model group of this config that embeds prompts
    /// (`redis_semantic_cache_embedding_model`, `semantic_cache_embedding_model`).
    pub embedding_model: String,
    /// The `cache_params` key `embedding_model` was read from, for the config's errors.
    pub embedding_model_key: &'static str,
    /// Longest an embedding call may take; past it the request is a plain miss.
    pub embedding_timeout: Duration,
    /// Where the vectors are kept.
    pub index: SemanticIndexKind,
}

/// Where a semantic cache keeps its vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SemanticIndexKind {
    /// sluice's `local-semantic`: an in-process index of at most this many prompts.
    Local {
        /// The index's bound (`max_entries`).
        max_entries: usize,
    },
    /// LiteLLM's `redis-semantic`: a RediSearch vector index in the cache's Redis.
    Redis {
        /// The index's name (`redis_semantic_cache_index_name`).
        index_name: String,
    },
}

/// How many prompts an in-process semantic index holds unless `max_entries` says otherwise.
pub const DEFAULT_SEMANTIC_ENTRIES: usize = 10_000;
/// LiteLLM's default name of the Redis vector index.
pub const DEFAULT_SEMANTIC_INDEX: &str = "litellm_semantic_cache_index";
/// How long an embedding for a lookup may take: past it a hit would not save much time.
pub const DEFAULT_EMBEDDING_TIMEOUT: Duration = Duration::from_secs(5);

/// LiteLLM's default TTL for its in-memory cache.
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// The store's default bound: 64 MiB of answers.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The endpoints with JSON bodies whose answers depend only on the request: what can be
/// cached.
pub const CACHEABLE: [Endpoint; 7] = [
    Endpoint::ChatCompletions,
    Endpoint::Completions,
    Endpoint::Responses,
    Endpoint::Messages,
    Endpoint::Embeddings,
    Endpoint::Rerank,
    Endpoint::Moderations,
];

/// LiteLLM's `supported_call_types` names, and the endpoint each means (`None`: a call type
/// LiteLLM has that sluice does not cache).
pub fn call_type(name: &str) -> Option<Option<Endpoint>> {
    Some(Some(
        match name
            .strip_prefix('a')
            .filter(|_| name != "anthropic_messages")
            .unwrap_or(name)
        {
            "completion" => Endpoint::ChatCompletions,
            "text_completion" => Endpoint::Completions,
            "responses" => Endpoint::Responses,
            "anthropic_messages" => Endpoint::Messages,
            "embedding" => Endpoint::Embeddings,
            "rerank" => Endpoint::Rerank,
            "moderation" => Endpoint::Moderations,
            "transcription" | "speech" | "image_generation" => return Some(None),
            _ => return None,
        },
    ))
}

impl CacheSettings {
    /// Whether `endpoint`'s answers are cached.
    pub fn caches(&self, endpoint: Endpoint) -> bool {
        self.call_types.contains(&endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn litellm_call_type_names() {
        assert_eq!(
            call_type("acompletion"),
            Some(Some(Endpoint::ChatCompletions))
        );
        assert_eq!(
            call_type("completion"),
            Some(Some(Endpoint::ChatCompletions))
        );
        assert_eq!(call_type("aembedding"), Some(Some(Endpoint::Embeddings)));
        assert_eq!(
            call_type("anthropic_messages"),
            Some(Some(Endpoint::Messages))
        );
        assert_eq!(call_type("atranscription"), Some(None));
        assert_eq!(call_type("chat"), None);
    }
}
