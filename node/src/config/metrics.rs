//! Metrics keys with RocketMQ 5's names (`metricsExporterType`, `metricsPromExporterPort`,
//! `metricsPromExporterHost`), shared by broker and name server configs. What they serve:
//! `crate::metrics`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// RocketMQ 5's default `metricsPromExporterPort`.
pub const PROM_PORT_DEFAULT: u16 = 5557;
/// Default of `metricsSeriesMax`: topics (and groups, and (group, topic) pairs) with their own
/// series.
pub const SERIES_MAX_DEFAULT: usize = 10_000;

/// `metricsExporterType`: RocketMQ's values; only `DISABLE` and `PROM` are implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricsExporter {
    #[default]
    Disable,
    /// A Prometheus text-exposition endpoint (`GET /metrics`).
    Prom,
}

/// Metrics settings of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `metricsExporterType`, default `DISABLE`.
    pub exporter: MetricsExporter,
    /// `metricsPromExporterPort`, default 5557; 0 = any free port (printed at start).
    pub prom_port: u16,
    /// `metricsPromExporterHost`: the address the endpoint binds; empty (RocketMQ's
    /// default) = all interfaces.
    pub prom_host: Option<IpAddr>,
    /// `metricsSeriesMax` (ringmq; brokers): topics, consumer groups and (group, topic) pairs
    /// with their own series, per shard; the rest share one `_overflow` series.
    pub series_max: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            exporter: MetricsExporter::Disable,
            prom_port: PROM_PORT_DEFAULT,
            prom_host: None,
            series_max: SERIES_MAX_DEFAULT,
        }
    }
}

impl MetricsConfig {
    /// Whether the node records metrics at all.
    pub fn is_on(&self) -> bool {
        self.exporter != MetricsExporter::Disable
    }

    /// Where the Prometheus endpoint listens, when it is on.
    pub fn prom_listen(&self) -> Option<SocketAddr> {
        match self.exporter {
            MetricsExporter::Disable => None,
            MetricsExporter::Prom => Some(SocketAddr::new(
                self.prom_host.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                self.prom_port,
            )),
        }
    }
}

/// Parses `metricsExporterType` (RocketMQ spells them in capitals; case is not significant).
pub(super) fn exporter(v: &str) -> Result<MetricsExporter, String> {
    match v.to_ascii_uppercase().as_str() {
        "DISABLE" => Ok(MetricsExporter::Disable),
        "PROM" => Ok(MetricsExporter::Prom),
        "OTLP_GRPC" | "LOG" => Err(format!(
            "{v}: only PROM (a Prometheus endpoint) and DISABLE are implemented"
        )),
        _ => Err(format!("expected DISABLE or PROM, got {v:?}")),
    }
}

/// Parses `metricsPromExporterHost`: empty = all interfaces, else an IP address.
pub(super) fn host(v: &str) -> Result<Option<IpAddr>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|_| format!("expected an IP address (or empty for all interfaces), got {v:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_values() {
        assert_eq!(exporter("PROM"), Ok(MetricsExporter::Prom));
        assert_eq!(exporter("disable"), Ok(MetricsExporter::Disable));
        let e = exporter("OTLP_GRPC").unwrap_err();
        assert!(e.contains("only PROM"), "{e}");
        assert!(exporter("LOG").unwrap_err().contains("only PROM"));
        assert!(exporter("x").is_err());
    }

    #[test]
    fn keys_apply_on_broker_and_namesrv() {
        use crate::config::{BrokerConfig, NamesrvConfig};
        let mut b = BrokerConfig::default();
        b.set("metricsExporterType", "PROM", "test").unwrap();
        b.set("metricsPromExporterPort", "0", "test").unwrap();
        b.set("metricsPromExporterHost", "127.0.0.1", "test")
            .unwrap();
        assert_eq!(
            b.metrics.prom_listen(),
            Some("127.0.0.1:0".parse().unwrap())
        );
        let e = b
            .set("metricsExporterType", "OTLP_GRPC", "test")
            .unwrap_err();
        assert!(e.to_string().contains("only PROM"), "{e}");
        assert!(b.set("metricsPromExporterPort", "70000", "test").is_err());
        let mut n = NamesrvConfig::default();
        n.set("metricsExporterType", "PROM", "test").unwrap();
        n.set("metricsPromExporterPort", "9100", "test").unwrap();
        assert_eq!(
            n.metrics.prom_listen(),
            Some("0.0.0.0:9100".parse().unwrap())
        );
    }

    #[test]
    fn listen_address() {
        let mut c = MetricsConfig::default();
        assert_eq!(c.prom_listen(), None);
        c.exporter = MetricsExporter::Prom;
        assert_eq!(c.prom_listen(), Some("0.0.0.0:5557".parse().unwrap()));
        c.prom_host = host("127.0.0.1").unwrap();
        c.prom_port = 0;
        assert_eq!(c.prom_listen(), Some("127.0.0.1:0".parse().unwrap()));
        assert_eq!(host(""), Ok(None));
        assert!(host("example").is_err());
    }
}
