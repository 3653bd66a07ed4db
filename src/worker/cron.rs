//! Periodic tasks from an Elastic Beanstalk `cron.yaml`: at each scheduled time the worker
//! POSTs to the task's path on the application with `X-Aws-Sqsd-Taskname` and
//! `X-Aws-Sqsd-Scheduled-At`, as `sqsd` does.
//!
//! ```yaml
//! version: 1
//! cron:
//!  - name: "backup"
//!    url: "/backup"
//!    schedule: "0 */12 * * *"
//! ```

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http_body_util::Full;
use hyper::Request;
use serde::Deserialize;
use tokio::sync::watch;

#[cfg(feature = "worker")]
use super::deliver::AppClient;

#[derive(Debug, Deserialize)]
struct CronFile {
    #[serde(default)]
    #[allow(dead_code)]
    version: Option<u32>,
    #[serde(default)]
    cron: Vec<TaskSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSpec {
    name: String,
    url: String,
    schedule: String,
}

/// One periodic task.
#[derive(Debug, Clone)]
pub struct CronTask {
    pub name: String,
    /// Path (and query) on the application, e.g. `/backup`.
    pub path: String,
    schedule: croner::Cron,
}

impl CronTask {
    /// The first scheduled time after `t`.
    pub fn next_after(&self, t: &DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedule.find_next_occurrence(t, false).ok()
    }
}

/// Parses `cron.yaml` text. Schedules are five-field cron expressions (a sixth, leading
/// seconds field is accepted too).
pub fn parse(text: &str) -> Result<Vec<CronTask>, String> {
    let file: CronFile = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    file.cron
        .into_iter()
        .map(|t| {
            let schedule = croner::Cron::new(&t.schedule)
                .with_seconds_optional()
                .parse()
                .map_err(|e| format!("task {:?}: schedule {:?}: {e}", t.name, t.schedule))?;
            if !t.url.starts_with('/') {
                return Err(format!(
                    "task {:?}: url must be a path starting with /",
                    t.name
                ));
            }
            Ok(CronTask {
                name: t.name,
                path: t.url,
                schedule,
            })
        })
        .collect()
}

/// `scheme://host:port` of the application URL.
pub(super) fn origin(http_url: &str) -> String {
    match http_url.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{}", rest.split('/').next().unwrap_or(rest)),
        None => http_url.trim_end_matches('/').to_string(),
    }
}

#[cfg(feature = "worker")]
/// Fires the tasks on schedule until `stop` turns true.
pub async fn run(
    tasks: Vec<CronTask>,
    app: AppClient,
    http_url: String,
    mime_type: String,
    mut stop: watch::Receiver<bool>,
) {
    if tasks.is_empty() {
        return;
    }
    let base = origin(&http_url);
    let mut after = Utc::now();
    loop {
        let next = tasks
            .iter()
            .filter_map(|t| t.next_after(&after).map(|at| (at, t)))
            .min_by_key(|(at, _)| *at);
        let Some((at, _)) = next else { return };
        let wait = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        // Every task due at this instant fires.
        for task in tasks.iter().filter(|t| t.next_after(&after) == Some(at)) {
            let req = Request::post(format!("{base}{}", task.path))
                .header("user-agent", super::deliver::USER_AGENT)
                .header("content-type", mime_type.as_str())
                .header("x-aws-sqsd-taskname", task.name.as_str())
                .header(
                    "x-aws-sqsd-scheduled-at",
                    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                )
                .header("x-aws-sqsd-msgid", uuid::Uuid::new_v4().to_string())
                .body(Full::new(Bytes::new()));
            if let Ok(req) = req {
                let app = app.clone();
                let name = task.name.clone();
                tokio::spawn(async move {
                    match app.request(req).await {
                        Ok(resp) => {
                            tracing::info!(task = %name, status = resp.status().as_u16(), "periodic task")
                        }
                        Err(e) => tracing::warn!(task = %name, error = %e, "periodic task failed"),
                    }
                });
            }
        }
        after = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_elastic_beanstalk_cron_yaml() {
        let tasks = parse(
            "version: 1\ncron:\n - name: \"backup\"\n   url: \"/backup\"\n   schedule: \"0 */12 * * *\"\n - name: report\n   url: /report?x=1\n   schedule: \"30 2 * * 1\"\n",
        )
        .unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].name, "backup");
        let t0 = "2024-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap();
        assert_eq!(
            tasks[0].next_after(&t0).unwrap().to_rfc3339(),
            "2024-01-01T12:00:00+00:00"
        );
        assert_eq!(
            tasks[1].next_after(&t0).unwrap().to_rfc3339(),
            "2024-01-01T02:30:00+00:00"
        );
        assert!(parse("cron:\n - name: x\n   url: /x\n   schedule: \"not a cron\"\n").is_err());
        assert!(parse("cron:\n - name: x\n   url: x\n   schedule: \"* * * * *\"\n").is_err());
        assert_eq!(
            origin("http://localhost:8080/work"),
            "http://localhost:8080"
        );
    }
}
