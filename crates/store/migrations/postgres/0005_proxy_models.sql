-- Deployments added at run time (`/model/new`, the console) with `store_model_in_db`
-- (LiteLLM's LiteLLM_ProxyModelTable). `litellm_params` is sealed by sluice before it is
-- written (it holds provider keys); `etag` changes with every write, so an instance polling
-- for changes compares ids and etags only.
CREATE TABLE proxy_models (
    model_id       TEXT PRIMARY KEY,
    model_name     TEXT NOT NULL,
    litellm_params TEXT NOT NULL,
    model_info     TEXT NOT NULL,
    etag           TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    created_by     TEXT NOT NULL,
    updated_at     BIGINT NOT NULL,
    updated_by     TEXT NOT NULL
);
