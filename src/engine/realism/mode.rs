//! Which realism behaviours are on and how strong (`--realism`): the setting itself, its
//! text form and the `aws` preset. A leaf, so that the engine's settings can hold it without
//! depending on what the behaviours do to a queue.

/// Which realism behaviours are on, and how strong each is. [`Realism::default`] is off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Realism {
    /// Partitions a standard queue's messages are spread over.
    pub short_poll: Option<u32>,
    /// How many of the first visible messages a receive may pick from.
    pub order: Option<u32>,
    /// Chance of a duplicate delivery per received message (and of a lost delete).
    pub duplicates: Option<f64>,
    /// Longest time, in seconds, counts lag behind.
    pub count_lag: Option<u32>,
    /// Propagation delays within AWS's documented bounds.
    pub propagation: bool,
    /// Throughput quotas: FIFO queues' documented ones, and `Some(n)` calls a second per
    /// action for standard queues.
    pub throttle: Option<Option<u32>>,
}

/// AWS-like strengths, used by the `aws` preset and by a behaviour named without a value.
const AWS_PARTITIONS: u32 = 8;
const AWS_ORDER_WINDOW: u32 = 10;
const AWS_DUPLICATES: f64 = 0.01;
const AWS_COUNT_LAG_S: u32 = 60;

impl Realism {
    /// Everything on at AWS-like strengths (`--realism aws`).
    pub fn aws() -> Realism {
        Realism {
            short_poll: Some(AWS_PARTITIONS),
            order: Some(AWS_ORDER_WINDOW),
            duplicates: Some(AWS_DUPLICATES),
            count_lag: Some(AWS_COUNT_LAG_S),
            propagation: true,
            throttle: Some(None),
        }
    }

    /// Whether any behaviour is on.
    pub fn is_on(&self) -> bool {
        *self != Realism::default()
    }

    /// Parses a spec: comma-separated items applied left to right — `aws` (all on), `off`
    /// (all off), `NAME` (on at its AWS-like strength), `NAME=VALUE`, `NAME=off`. Names:
    /// `short_poll` (partitions, 2 to 1000), `order` (window, 2 to 1000), `duplicates`
    /// (chance, 0 to 1), `count_lag` (seconds, 1 to 3600), `propagation`, `throttle`
    /// (standard queues' calls a second per action, 1 to 1000000).
    pub fn parse(spec: &str) -> Result<Realism, String> {
        let mut r = Realism::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = match item.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (item, None),
            };
            let off = value == Some("off");
            let number = |lo: f64, hi: f64| -> Result<Option<f64>, String> {
                match value {
                    None => Ok(None),
                    Some(v) => match v.parse::<f64>() {
                        Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
                        _ => Err(format!(
                            "realism: {name} must be off or {lo} to {hi}, got {v:?}"
                        )),
                    },
                }
            };
            match name {
                "aws" if value.is_none() => r = Realism::aws(),
                "off" if value.is_none() => r = Realism::default(),
                "short_poll" => {
                    r.short_poll = (!off)
                        .then(|| number(2.0, 1000.0))
                        .transpose()?
                        .map(|n| n.map_or(AWS_PARTITIONS, |n| n as u32))
                }
                "order" => {
                    r.order = (!off)
                        .then(|| number(2.0, 1000.0))
                        .transpose()?
                        .map(|n| n.map_or(AWS_ORDER_WINDOW, |n| n as u32))
                }
                "duplicates" => {
                    r.duplicates = (!off)
                        .then(|| number(0.0, 1.0))
                        .transpose()?
                        .map(|n| n.unwrap_or(AWS_DUPLICATES))
                }
                "count_lag" => {
                    r.count_lag = (!off)
                        .then(|| number(1.0, 3600.0))
                        .transpose()?
                        .map(|n| n.map_or(AWS_COUNT_LAG_S, |n| n as u32))
                }
                "propagation" if value.is_none() || off => r.propagation = !off,
                "throttle" => {
                    r.throttle = (!off)
                        .then(|| number(1.0, 1_000_000.0))
                        .transpose()?
                        .map(|n| n.map(|n| n as u32))
                }
                _ => {
                    return Err(format!(
                        "realism: unknown item {item:?} (aws, off, short_poll, order, duplicates, count_lag, propagation, throttle)"
                    ))
                }
            }
        }
        Ok(r)
    }

    /// The spec that parses back to this setting (`off` when nothing is on).
    pub fn spec(&self) -> String {
        if !self.is_on() {
            return "off".into();
        }
        let mut items = Vec::new();
        if let Some(n) = self.short_poll {
            items.push(format!("short_poll={n}"));
        }
        if let Some(n) = self.order {
            items.push(format!("order={n}"));
        }
        if let Some(p) = self.duplicates {
            items.push(format!("duplicates={p}"));
        }
        if let Some(s) = self.count_lag {
            items.push(format!("count_lag={s}"));
        }
        if self.propagation {
            items.push("propagation".into());
        }
        match self.throttle {
            Some(Some(n)) => items.push(format!("throttle={n}")),
            Some(None) => items.push("throttle".into()),
            None => {}
        }
        items.join(",")
    }
}
