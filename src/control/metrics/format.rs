//! The two text formats a scrape may ask for. `prometheus-client` writes OpenMetrics 1.0;
//! a scraper that did not ask for it (Prometheus without the negotiation, Python's
//! `prometheus_client` parser, most agents) reads the older Prometheus text format 0.0.4,
//! where OpenMetrics' counter families are typed under another name and `# EOF`, `# UNIT`
//! and `info` do not exist. Served the OpenMetrics body under the older content type, such
//! a reader took every counter for an untyped metric and split families apart.

/// The content type of the OpenMetrics text format.
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the Prometheus text format.
pub(crate) const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether the scraper's `Accept` asks for OpenMetrics (Prometheus sends
/// `application/openmetrics-text;version=1.0.0,…;q=0.5,text/plain;version=0.0.4;q=0.4,…`):
/// only when it ranks it above the text format, or names it without the text format.
pub(crate) fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let quality = |kind: &str| {
        accept
            .split(',')
            .filter(|part| {
                part.split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case(kind))
            })
            .map(|part| {
                part.split(';')
                    .filter_map(|p| p.trim().strip_prefix("q="))
                    .find_map(|q| q.parse::<f32>().ok())
                    .unwrap_or(1.0)
            })
            .fold(None, |best: Option<f32>, q| {
                Some(best.map_or(q, |b| b.max(q)))
            })
    };
    match (
        quality("application/openmetrics-text"),
        quality("text/plain"),
    ) {
        (Some(om), Some(text)) => om > 0.0 && om >= text,
        (Some(om), None) => om > 0.0,
        _ => false,
    }
}

/// The OpenMetrics exposition `om` in the Prometheus text format: counter families named
/// with their `_total` samples' name, `info` families as gauges of their `_info` samples,
/// `unknown` as `untyped`, and no `# UNIT` or `# EOF` lines. Samples are unchanged (sqsim
/// writes no exemplars and no `_created` series).
pub(crate) fn to_prometheus(om: &str) -> String {
    // Each family's type: its `# HELP` line comes before its `# TYPE` line.
    let types: std::collections::HashMap<&str, &str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = line
            .strip_prefix("# TYPE ")
            .map(|rest| ("# TYPE ", rest))
            .or_else(|| line.strip_prefix("# HELP ").map(|rest| ("# HELP ", rest)));
        match descriptor {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let family_type = types.get(name).copied().unwrap_or("");
                let (name, tail) = match (family_type, kind) {
                    ("counter", _) => (format!("{name}_total"), tail),
                    ("info", "# TYPE ") => (format!("{name}_info"), "gauge"),
                    ("info", _) => (format!("{name}_info"), tail),
                    (_, "# TYPE ") if tail == "unknown" => (name.to_string(), "untyped"),
                    _ => (name.to_string(), tail),
                };
                out.push_str(kind);
                out.push_str(&name);
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_what_the_scraper_ranks_first() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(wants_openmetrics(Some("application/openmetrics-text")));
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0.2,text/plain;q=0.9"
        )));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
    }

    #[test]
    fn counters_and_info_are_renamed_and_the_rest_kept() {
        let om = "# HELP sqsim_messages_sent Messages stored.\n# TYPE sqsim_messages_sent counter\nsqsim_messages_sent_total{queue=\"q\"} 3\n# HELP sqsim_build sqsim's version.\n# TYPE sqsim_build info\nsqsim_build_info{version=\"0.1.0\"} 1\n# HELP process_resident_memory_bytes RSS.\n# TYPE process_resident_memory_bytes gauge\n# UNIT process_resident_memory_bytes bytes\nprocess_resident_memory_bytes 5\n# EOF\n";
        assert_eq!(
            to_prometheus(om),
            "# HELP sqsim_messages_sent_total Messages stored.\n# TYPE sqsim_messages_sent_total counter\nsqsim_messages_sent_total{queue=\"q\"} 3\n# HELP sqsim_build_info sqsim's version.\n# TYPE sqsim_build_info gauge\nsqsim_build_info{version=\"0.1.0\"} 1\n# HELP process_resident_memory_bytes RSS.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 5\n"
        );
    }
}
