//! Who may do what: access keys, the control plane's guard, and the secrets (tokens,
//! the cluster's peer secret) sqsim makes and compares.

use std::collections::HashMap;

use super::is_account_id;

/// A known access key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub access_key: String,
    pub secret_key: String,
    /// The account this key acts as; the server default when `None`.
    pub account_id: Option<String>,
    /// Whether requests signed with it may use the control plane (admin API, console,
    /// metrics) under `--auth verify`.
    pub admin: bool,
}

impl Credential {
    /// Parses `ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin]`.
    pub fn parse(s: &str) -> Option<Credential> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        let (access_key, secret_key, rest) = match parts.as_slice() {
            [a, s, rest @ ..] if !a.is_empty() && !s.is_empty() && rest.len() <= 2 => {
                (a.to_string(), s.to_string(), rest)
            }
            _ => return None,
        };
        let (account_id, admin) = match rest {
            [] => (None, false),
            ["admin"] => (None, true),
            [a] => (Some(a.to_string()), false),
            [a, "admin"] => (Some(a.to_string()), true),
            _ => return None,
        };
        if account_id.as_ref().is_some_and(|a| !is_account_id(a)) {
            return None;
        }
        Some(Credential {
            access_key,
            secret_key,
            account_id,
            admin,
        })
    }

    /// Reads a credentials file: one `ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin]` a line;
    /// blank lines and lines starting with `#` are skipped. Keeps secrets out of `ps`.
    pub fn read_file(path: &str) -> Result<Vec<Credential>, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the credentials file {path}: {e}"))?;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            out.push(Credential::parse(line).ok_or_else(|| {
                format!(
                    "{path} line {}: expected ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin]",
                    i + 1
                )
            })?);
        }
        Ok(out)
    }
}

/// Who may reach sqsim's control plane (admin API, console, metrics, LocalStack's
/// developer endpoints) and from which web pages; see docs/security.md.
#[derive(Debug, Clone)]
pub struct Security {
    /// Origins (`scheme://host[:port]`) whose web pages may call sqsim (answered with CORS
    /// headers naming them); no page of any other origin can, whatever it sends.
    pub allowed_origins: Vec<String>,
    /// Host names, besides loopback names, IP addresses, single-label names and the advertised
    /// URL's host, that requests to the control plane (and requests from browsers) may name
    /// in `Host`: what stops DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// `Authorization: Bearer <token>` that opens the control plane, and the console's login.
    /// With `--auth verify` and no token, one is made up at start and printed.
    pub admin_token: Option<String>,
    /// Whether the control plane is served at all (`--admin off` removes it: only the SQS
    /// API and the health check remain).
    pub admin: bool,
}

impl Default for Security {
    fn default() -> Self {
        Security {
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            admin_token: None,
            admin: true,
        }
    }
}

/// Whether and how requests are authenticated.
#[derive(Debug, Clone, Default)]
pub enum AuthMode {
    /// Any credentials (or none) are accepted, as every peer emulator does.
    #[default]
    Off,
    /// Signatures are checked against these keys.
    Verify(HashMap<String, Credential>),
}

/// A new secret (an admin token, a console session, the cluster's peer secret): 244 random
/// bits from the OS's generator (two v4 UUIDs), as 64 hex digits.
pub(crate) fn new_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Constant-time comparison of two secrets (signatures, tokens): a mismatch takes as long
/// wherever it starts.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}
