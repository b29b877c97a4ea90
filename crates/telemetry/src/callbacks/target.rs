//! Where a sink sends a batch: one enum over the sink types (a new one does not compile until
//! it can deliver). How each sends is in its module, on the helpers of `deliver`.

use std::sync::Arc;

use bytes::BytesMut;
use sluice_config::{SinkKind, SinkSettings};

use super::deliver::{header_map, parse_uri, DeliverError, Http};
use super::payload::CallbackRecord;
use super::{gcs, langfuse, langsmith, s3, webhook};
use crate::otel;

/// A sink, ready to send.
#[derive(Debug)]
pub enum Target {
    /// Generic HTTP JSON.
    Webhook(webhook::Webhook),
    /// Langfuse ingestion.
    Langfuse(langfuse::Langfuse),
    /// LangSmith runs batch.
    LangSmith(langsmith::LangSmith),
    /// S3-compatible object per batch.
    S3(s3::S3),
    /// Google Cloud Storage object per batch.
    Gcs(gcs::Gcs),
    /// OTLP traces.
    Otel(otel::Exporter),
}

impl Target {
    /// Prepare a sink from its settings.
    pub fn build(s: &SinkSettings, http: &Http) -> Result<Self, DeliverError> {
        Ok(match &s.kind {
            SinkKind::Webhook {
                url,
                headers,
                ndjson,
            } => Self::Webhook(webhook::Webhook {
                uri: parse_uri(url)?,
                headers: header_map(headers)?,
                ndjson: *ndjson,
                http: http.clone(),
            }),
            SinkKind::Langfuse {
                host,
                public_key,
                secret_key,
            } => Self::Langfuse(langfuse::Langfuse::new(host, public_key, secret_key, http)?),
            SinkKind::LangSmith {
                endpoint,
                api_key,
                project,
            } => Self::LangSmith(langsmith::LangSmith::new(endpoint, api_key, project, http)?),
            SinkKind::S3 { .. } => Self::S3(s3::S3::new(&s.kind, http)?),
            SinkKind::Gcs {
                bucket,
                prefix,
                credentials,
                api_base,
            } => Self::Gcs(gcs::Gcs::new(bucket, prefix, credentials, api_base, http)?),
            SinkKind::Otel {
                endpoint,
                grpc,
                headers,
                service_name,
            } => Self::Otel(otel::Exporter {
                uri: parse_uri(endpoint)?,
                grpc: *grpc,
                headers: header_map(headers)?,
                service_name: service_name.clone(),
                http: http.clone(),
            }),
        })
    }

    /// Send one batch, encoded into `buf`: the sink's own buffer, kept across batches so that
    /// encoding reuses one allocation instead of growing (and page-faulting) a fresh one each
    /// time.
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut BytesMut,
    ) -> Result<(), DeliverError> {
        match self {
            Self::Webhook(t) => t.deliver(batch, buf).await,
            Self::Langfuse(t) => t.deliver(batch, buf).await,
            Self::LangSmith(t) => t.deliver(batch, buf).await,
            Self::S3(t) => t.deliver(batch, buf).await,
            Self::Gcs(t) => t.deliver(batch, buf).await,
            Self::Otel(t) => t.deliver(batch, buf).await,
        }
    }
}
