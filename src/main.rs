//! The `sluice` binary: parse the command line and run the gateway, the config check, the
//! mock provider, the benchmark, the health check or an import.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

#[cfg(feature = "mock")]
use sluice::cli::MockArgs;
use sluice::cli::{Cli, Command, HealthcheckArgs, ImportFrom, ServeArgs};
use sluice::server::{self, AppState, ServiceOptions, Services};
#[cfg(feature = "bench")]
use sluice_bench::BenchArgs;
use sluice_config::{self as config, ProcessEnv};
use sluice_core::record::RecordSink;
#[cfg(feature = "mock")]
use sluice_mock::{Faults, MockSettings};
use sluice_telemetry::{self as telemetry, LogFormat, LogSink, Recorder};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    purge_freed_memory_at_once();
    no_transparent_huge_pages();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::CheckConfig { file }) => check_config(&file),
        Some(Command::Serve(args)) => control(|rt| rt.block_on(serve(args))),
        #[cfg(feature = "mock")]
        Some(Command::Mock(args)) => control(|rt| rt.block_on(mock(args))),
        #[cfg(feature = "bench")]
        Some(Command::Bench(args)) => run(tokio::runtime::Builder::new_multi_thread(), |rt| {
            rt.block_on(bench(args))
        }),
        Some(Command::Healthcheck(args)) => healthcheck(&args),
        Some(Command::Import(ImportFrom::Litellm(args))) => {
            control(|rt| rt.block_on(sluice::import::run(args)))
        }
        None => control(|rt| rt.block_on(serve(cli.serve))),
    }
}

/// `mi_option_purge_delay` in mimalloc.h (v3); libmimalloc-sys does not export its index.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's default purge delay.
const DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 1000;

/// Return freed memory to the OS as soon as it is free. mimalloc otherwise keeps it for a
/// second and purges it only when the thread that owns it allocates again, so a worker that
/// goes idle after a burst keeps its peak for good (242 MB at rest after a benchmark run,
/// against 75 MB with this). `MIMALLOC_PURGE_DELAY` in the environment still wins.
#[expect(
    unsafe_code,
    reason = "mimalloc's option API is C; the mimalloc crate has no safe setter"
)]
fn purge_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mi_option_get and mi_option_set read and write one integer in mimalloc's option
    // table; they take no pointers and are thread-safe. The index is checked against the
    // option's known default first, so a mimalloc whose option order changed is left alone.
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) == DEFAULT_PURGE_DELAY_MS {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        }
    }
}

/// Keep the heap in 4 KiB pages. mimalloc asks for transparent huge pages on its arena
/// (`madvise(MADV_HUGEPAGE)`), and a 2 MiB page is resident whole as soon as one byte of it is
/// touched: with 1,000 held streams, whose buffers are mostly untouched, the gateway's peak RSS
/// was 82–88 MB with huge pages and 57–61 MB without (five interleaved runs each); at rest 21
/// against 14 MB. This is what mimalloc itself does with `MIMALLOC_ALLOW_THP=0` (its default on
/// Android); the flag covers the whole process, mappings made before `main` included, and is
/// inherited by children. `MIMALLOC_ALLOW_THP` in the environment still wins.
fn no_transparent_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!("sluice: cannot turn transparent huge pages off: {e}");
    }
}

/// The servers run on worker threads of their own (`server::serve_threads`); the main thread
/// runs a single-threaded runtime for signals, config reloads and the recorder.
fn control(f: impl FnOnce(&tokio::runtime::Runtime) -> ExitCode) -> ExitCode {
    run(tokio::runtime::Builder::new_current_thread(), f)
}

fn run(
    mut builder: tokio::runtime::Builder,
    f: impl FnOnce(&tokio::runtime::Runtime) -> ExitCode,
) -> ExitCode {
    builder.enable_all();
    match builder.build() {
        Ok(rt) => f(&rt),
        Err(e) => {
            eprintln!("sluice: cannot start the runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

#[expect(
    clippy::print_stdout,
    reason = "check-config's output is the resolved model list"
)]
fn check_config(file: &Path) -> ExitCode {
    match config::load_file(file, &ProcessEnv) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", config::describe(&loaded.config));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `sluice healthcheck`: one line on the outcome (Docker keeps it in the container's health
/// log), exit 0 when the gateway answered 2xx.
#[expect(
    clippy::print_stdout,
    reason = "the health check's one line of output is its report"
)]
fn healthcheck(args: &HealthcheckArgs) -> ExitCode {
    let url = args
        .url
        .clone()
        .unwrap_or_else(|| sluice::healthcheck::default_url(args.host, args.port));
    let timeout = Duration::try_from_secs_f64(args.timeout_secs).unwrap_or(Duration::from_secs(3));
    match sluice::healthcheck::check(&url, timeout) {
        Ok(status) => {
            println!("healthy: {url} answered {status}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("unhealthy: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: ServeArgs) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(path) = args.config.clone() else {
        eprintln!("sluice: no config given; try `sluice serve --config examples/quickstart.yaml`");
        return ExitCode::FAILURE;
    };
    let source = match config::Source::from_file(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The secret manager first: the rest of the config's references read its values.
    let vars = match sluice::secrets::open(&source).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::FAILURE;
        }
    };
    let loaded = match source.load(&[], &vars) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::FAILURE;
        }
    };
    let tls = match listener_tls(&args, &loaded.config.general) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::FAILURE;
        }
    };
    let format = if loaded.config.litellm.json_logs {
        LogFormat::Json
    } else {
        args.log_format
    };
    let _log_guard = telemetry::init(format);
    sluice::secrets::log_status(&vars);
    for w in &loaded.warnings {
        tracing::warn!("config: {w}");
    }
    if loaded.config.general.master_key.is_none() {
        tracing::warn!(
            "no general_settings.master_key: the gateway accepts requests without a key"
        );
    }
    let workers = worker_count(args.workers);
    let options = ServiceOptions {
        data_dir: args.data_dir.clone(),
    };
    let mut services = match Services::start(&loaded.config, &options).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let store = services.store.as_ref().map(|s| &s.store);
    let (served, runtime) =
        match sluice::models::prepare(loaded.config, store, source, vars.clone()).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("stored deployments: {e}");
                return ExitCode::FAILURE;
            }
        };
    let writer_task = services.writer_task.take();
    let mut sinks: Vec<Box<dyn RecordSink>> = vec![Box::new(LogSink)];
    sinks.extend(services.sinks());
    let (recorder, recorder_task) = Recorder::start_with(sinks, options.callbacks());
    let state = match AppState::with_services(&served, recorder, services, workers) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = shutdown_signal();
    let Some(listeners) = bind(
        SocketAddr::new(args.host, args.port),
        workers,
        args.ready_file.as_deref(),
    )
    .await
    else {
        return ExitCode::FAILURE;
    };
    state.set_config_path(path);
    state.set_vars(vars);
    if let Some(rt) = runtime {
        sluice::models::serve(&state, rt);
    }
    let reloader = tokio::spawn(reload_on_sighup(state.clone()));
    let refresher = tokio::spawn(sluice::secrets::refresh(state.clone()));
    let models = state.snapshot().router.models.names().len();
    tracing::info!(models, workers, "sluice {} serving", sluice::cli::VERSION);
    let grace = Duration::from_secs_f64(args.shutdown_grace_secs.max(0.0));
    let served = server::serve_workers(listeners, tls, state, shutdown, grace).await;
    reloader.abort();
    refresher.abort();
    if let Err(e) = served {
        tracing::error!(error = %e, "cannot start the worker threads");
        return ExitCode::FAILURE;
    }
    // The workers have drained their own recorder queues; the shared one ends once every
    // handle (the state, open streams) is gone, after draining; give it a moment so that the
    // last requests' records are written before exit.
    let _ = tokio::time::timeout(Duration::from_secs(5), recorder_task).await;
    // Then the spend writer writes (or spools) what the recorder handed it, and ends.
    if let Some(task) = writer_task {
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
    ExitCode::SUCCESS
}

/// The listener's TLS: `--tls-cert` / `--tls-key`, else `general_settings.ssl_certfile_path` /
/// `ssl_keyfile_path`, else none. The error names the flag or key and the file.
fn listener_tls(
    args: &ServeArgs,
    general: &config::GeneralSettings,
) -> Result<Option<sluice_net::server::Tls>, String> {
    let (cert, key, names) = match (&args.tls_cert, &args.tls_key, &general.tls) {
        (Some(c), Some(k), _) => (c, k, ("--tls-cert", "--tls-key")),
        (None, None, Some((c, k))) => (
            c,
            k,
            (
                "general_settings.ssl_certfile_path",
                "general_settings.ssl_keyfile_path",
            ),
        ),
        (Some(_), None, _) => return Err("--tls-cert needs --tls-key".into()),
        (None, Some(_), _) => return Err("--tls-key needs --tls-cert".into()),
        (None, None, None) => return Ok(None),
    };
    use sluice_net::server::{Tls, TlsError};
    Tls::from_pem_files(cert, key)
        .map(Some)
        .map_err(|e| match e {
            TlsError::Cert(why) => format!("{} {}: {why}", names.0, cert.display()),
            TlsError::Key(why) => format!("{} {}: {why}", names.1, key.display()),
            TlsError::Pair(why) => format!(
                "{} {} with {} {}: {why}",
                names.0,
                cert.display(),
                names.1,
                key.display()
            ),
        })
}

#[cfg(feature = "mock")]
async fn mock(args: MockArgs) -> ExitCode {
    let _log_guard = telemetry::init(LogFormat::Text);
    let tls = match mock_tls(&args) {
        Ok(tls) => tls,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve the mock over TLS");
            return ExitCode::FAILURE;
        }
    };
    let settings = MockSettings {
        latency: Duration::from_millis(args.latency_ms),
        chunk_interval: Duration::from_millis(args.chunk_interval_ms),
        chunks: args.chunks,
        response_tokens: args.response_tokens,
        embedding_dims: args.embedding_dims,
        faults: Faults {
            status: args.fail_status,
            failure_rate: args.failure_rate,
            retry_after: args.retry_after,
            reset: args.reset,
            stall_after_chunks: args.stall_after_chunks,
            stall: Duration::from_millis(args.stall_ms),
            cut_after_chunks: args.cut_after_chunks,
            garbage: args.garbage,
            huge_bytes: args.huge_bytes,
        },
        aws: args.aws_access_key_id.zip(args.aws_secret_access_key),
        api_key: args.api_key,
        ..MockSettings::default()
    };
    let record = args.record.then_some(sluice_mock::RECORD_LIMIT);
    let shutdown = shutdown_signal();
    let Some(listeners) = bind(
        SocketAddr::new(args.host, args.port),
        worker_count(args.workers),
        args.ready_file.as_deref(),
    )
    .await
    else {
        return ExitCode::FAILURE;
    };
    tracing::info!("sluice mock provider serving");
    match sluice_mock::serve_workers(listeners, tls, settings, record, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "mock server failed");
            ExitCode::FAILURE
        }
    }
}

/// The mock's TLS: `--tls-cert` / `--tls-key`, and `--tls-client-ca` for mutual TLS.
#[cfg(feature = "mock")]
fn mock_tls(args: &MockArgs) -> Result<Option<sluice_net::server::Tls>, String> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let read = |flag: &str, p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
    };
    let (cert_pem, key_pem) = (read("--tls-cert", cert)?, read("--tls-key", key)?);
    let tls = match &args.tls_client_ca {
        None => sluice_net::server::Tls::from_pem(&cert_pem, &key_pem),
        Some(ca) => sluice_net::server::Tls::from_pem_requiring_client(
            &cert_pem,
            &key_pem,
            &read("--tls-client-ca", ca)?,
        ),
    };
    tls.map(Some).map_err(|e| e.to_string())
}

#[cfg(feature = "bench")]
#[expect(clippy::print_stdout, reason = "bench prints its results table")]
async fn bench(args: BenchArgs) -> ExitCode {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    match sluice_bench::run(args, command).await {
        Ok(out) => {
            print!("{}", out.report.table());
            println!("results: {}", out.dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--workers`, or one per core.
fn worker_count(workers: Option<usize>) -> usize {
    workers
        .filter(|n| *n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(Into::into))
        .unwrap_or(1)
}

/// Bind one listening socket per worker and write the address to the ready file.
async fn bind(
    addr: SocketAddr,
    workers: usize,
    ready_file: Option<&Path>,
) -> Option<Vec<std::net::TcpListener>> {
    let listeners = match sluice_net::server::bind_workers(addr, workers).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(%addr, error = %e, "cannot listen");
            eprintln!("sluice: cannot listen on {addr}: {e}");
            return None;
        }
    };
    let local = listeners.first()?.local_addr().ok()?;
    tracing::info!(address = %local, workers, "listening");
    if let Some(file) = ready_file {
        if let Err(e) = std::fs::write(file, local.to_string()) {
            tracing::error!(error = %e, "cannot write the ready file");
            return None;
        }
    }
    Some(listeners)
}

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called, not when the
/// future is first polled: called before the listeners are bound (and the ready file written),
/// a SIGTERM that follows at once (a container or pod stopped right after it started) drains
/// and exits 0 instead of killing the process by the signal's default action.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let (term, int) = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wait(term) => {},
                () = wait(int) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutdown signal received");
    }
}

/// SIGHUP re-reads the config; a bad one is logged and the running one keeps serving.
async fn reload_on_sighup(state: std::sync::Arc<AppState>) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hup.recv().await.is_some() {
            match state.reload_from_file().await {
                Ok(warnings) => {
                    for w in &warnings {
                        tracing::warn!("config: {w}");
                    }
                    tracing::info!("config reloaded");
                }
                Err(e) => tracing::error!("config reload rejected: {e}"),
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = state;
    }
}
