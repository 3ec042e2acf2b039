//! `redlock check`: one line per server and a verdict.

use redlock_redis::{check_deployment, Finding, Severity};

use crate::cli::ServerArgs;
use crate::exit::{Exit, UNAVAILABLE, UNFIT};

fn mark(finding: &Finding) -> &'static str {
    match finding.severity() {
        Severity::Error => "error",
        _ => "warning",
    }
}

pub(crate) fn check(args: &ServerArgs) -> Result<u8, Exit> {
    let urls = crate::servers::urls(&args.servers)?;
    let report = check_deployment(&urls, args.timeout).map_err(|e| Exit::usage(e.to_string()))?;
    for server in report.servers() {
        let summary = match server.info() {
            Ok(info) => format!(
                "reachable, {:.1} ms, {} {}, role {}, maxmemory-policy {}, aof {}, appendfsync {}",
                info.latency.as_secs_f64() * 1000.0,
                info.server,
                info.version,
                info.role,
                info.maxmemory_policy.as_deref().unwrap_or("unknown"),
                if info.aof { "on" } else { "off" },
                info.appendfsync.as_deref().unwrap_or("unknown"),
            ),
            Err(_) => "unreachable".to_owned(),
        };
        let verdict = if server.is_fit() { "ok" } else { "FAIL" };
        crate::tell!("{verdict:4} {}: {summary}", server.node());
        for finding in server.findings() {
            crate::tell!("     {}: {}: {finding}", mark(finding), server.node());
        }
    }
    for finding in report.findings() {
        crate::tell!("     {}: {finding}", mark(finding));
    }
    let distinct = report.servers().len();
    if report.is_fit() {
        crate::tell!("fit: {distinct} server(s) fit for Redlock");
        Ok(0)
    } else if report.any_unreachable() {
        crate::tell!("NOT FIT: some servers are unreachable");
        Ok(UNAVAILABLE)
    } else {
        crate::tell!("NOT FIT: fix the errors above (docs/operations.md)");
        Ok(UNFIT)
    }
}
