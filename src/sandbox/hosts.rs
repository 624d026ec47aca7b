//! Which hosts a fenced process may reach through kern's proxy: the rules (`HostRule`), the
//! agent's own API by agent kind, and the one matcher both the proxy and the dry run use.
//!
//! The one decision a reader must know: a rule names a host (or `*.` a domain and everything
//! under it) and optionally a port; a rule without a port allows 443 and 80 only, so that
//! allowing `registry.npmjs.org` never opens its ssh or database ports. Names are compared
//! case-insensitively, without a trailing dot; an IP is only matched by a rule that names that
//! IP (a name's rule never matches the address it resolves to, so a rebinding name cannot
//! reach a loopback service that is not on the list).

use std::fmt;
use std::str::FromStr;

/// The ports a rule without a port allows.
pub(crate) const DEFAULT_PORTS: [u16; 2] = [443, 80];

/// One allowed host: `api.anthropic.com`, `*.npmjs.org`, `github.com:22`, `127.0.0.1:8080`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostRule {
    /// The host, lower case, without a trailing dot; a leading `*.` matches the domain and
    /// every name under it.
    pub host: String,
    /// The port; `None` allows [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

impl HostRule {
    /// A rule for `host` on `port`.
    pub(crate) fn new(host: &str, port: Option<u16>) -> HostRule {
        HostRule {
            host: normal(host),
            port,
        }
    }

    /// True when this rule lets a connection to `host`:`port` through.
    pub(crate) fn allows(&self, host: &str, port: u16) -> bool {
        let host = normal(host);
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        let host_ok = match self.host.strip_prefix("*.") {
            Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
            None => host == self.host,
        };
        port_ok && host_ok
    }

    /// The loopback address and port this rule names exactly (`127.0.0.1:8080`,
    /// `localhost:8080`, `[::1]:8080`): a local service the fence forwards to at the same
    /// port inside its own network.
    pub(crate) fn loopback(&self) -> Option<u16> {
        let port = self.port?;
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let local = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        local.then_some(port)
    }
}

/// `true` when `host`:`port` is allowed by one of `rules`.
pub(crate) fn allowed(rules: &[HostRule], host: &str, port: u16) -> bool {
    rules.iter().any(|r| r.allows(host, port))
}

fn normal(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

impl FromStr for HostRule {
    type Err = String;

    fn from_str(text: &str) -> Result<HostRule, String> {
        let text = text.trim();
        let bad = || {
            format!(
                "`{text}` is not a host — write a name (`registry.npmjs.org`), `*.domain`, `host:port` or an IP (`127.0.0.1:8080`, `[::1]:8080`)"
            )
        };
        if text.is_empty() || text.contains('/') || text.contains(char::is_whitespace) {
            return Err(bad());
        }
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (ip, tail) = rest.split_once(']').ok_or_else(bad)?;
            ip.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
            let port = match tail.strip_prefix(':') {
                Some(p) => Some(p.parse::<u16>().map_err(|_| bad())?),
                None if tail.is_empty() => None,
                None => return Err(bad()),
            };
            (format!("[{ip}]"), port)
        } else if text.parse::<std::net::Ipv6Addr>().is_ok() {
            (format!("[{text}]"), None)
        } else {
            match text.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p.parse::<u16>().map_err(|_| bad())?)),
                None => (text.to_string(), None),
            }
        };
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let valid = !name.is_empty()
            && (name.starts_with('[')
                || name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'));
        if !valid || port == Some(0) {
            return Err(bad());
        }
        Ok(HostRule::new(&host, port))
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

impl TryFrom<String> for HostRule {
    type Error = String;
    fn try_from(text: String) -> Result<HostRule, String> {
        text.parse()
    }
}

impl From<HostRule> for String {
    fn from(rule: HostRule) -> String {
        rule.to_string()
    }
}

/// The agent kinds whose own API the fence lets through by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
    /// A `program:` agent: no API of its own; it gets what the person allows.
    Program,
    /// Not an agent: the check, a `run` must-have, a git hook.
    None,
}

/// The hosts an agent of `kind` talks to for its model and its login: Claude Code's API and
/// OAuth hosts; Codex's (the OpenAI API, the ChatGPT login). `base_urls` are the addresses the
/// agent is pointed at instead or as well (`ANTHROPIC_BASE_URL`, `ANTHROPIC_VERTEX_BASE_URL`,
/// Codex's provider `base_url`): their host and port are its API too.
pub(crate) fn agent_hosts(kind: AgentKind, base_urls: &[String]) -> Vec<HostRule> {
    let names: &[&str] = match kind {
        AgentKind::Claude => &[
            "api.anthropic.com",
            "console.anthropic.com",
            "statsig.anthropic.com",
            "claude.ai",
            "platform.claude.com",
        ],
        AgentKind::Codex => &["api.openai.com", "chatgpt.com", "auth.openai.com"],
        AgentKind::Program | AgentKind::None => &[],
    };
    let mut rules: Vec<HostRule> = names.iter().map(|n| HostRule::new(n, None)).collect();
    for url in base_urls {
        if let Some(rule) = url_host(url)
            && !rules.contains(&rule)
        {
            rules.push(rule);
        }
    }
    rules
}

/// The host and port of an `http://` or `https://` URL (`None` for anything else).
pub(crate) fn url_host(url: &str) -> Option<HostRule> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let rule: HostRule = authority.parse().ok()?;
    Some(HostRule::new(
        &rule.host,
        Some(rule.port.unwrap_or(default)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_print_as_written() {
        let cases: &[(&str, Result<&str, ()>)] = &[
            ("api.anthropic.com", Ok("api.anthropic.com")),
            ("API.Anthropic.com.", Ok("api.anthropic.com")),
            ("*.npmjs.org", Ok("*.npmjs.org")),
            ("github.com:22", Ok("github.com:22")),
            ("127.0.0.1:8080", Ok("127.0.0.1:8080")),
            ("[::1]:8080", Ok("[::1]:8080")),
            ("::1", Ok("[::1]")),
            ("localhost:9", Ok("localhost:9")),
            ("", Err(())),
            ("https://x.com", Err(())),
            ("x.com:0", Err(())),
            ("x.com:99999", Err(())),
            ("a b", Err(())),
            ("*.", Err(())),
        ];
        for (text, want) in cases {
            let got = text.parse::<HostRule>().map(|r| r.to_string());
            match want {
                Ok(w) => assert_eq!(got.as_deref(), Ok(*w), "{text}"),
                Err(()) => assert!(got.is_err(), "{text}: {got:?}"),
            }
        }
    }

    #[test]
    fn matching_is_by_name_domain_and_port() {
        let rule = |t: &str| t.parse::<HostRule>().unwrap();
        let cases = [
            ("api.anthropic.com", "api.anthropic.com", 443, true),
            ("api.anthropic.com", "API.anthropic.com.", 443, true),
            ("api.anthropic.com", "api.anthropic.com", 80, true),
            ("api.anthropic.com", "api.anthropic.com", 22, false),
            ("api.anthropic.com", "evil.api.anthropic.com", 443, false),
            ("*.npmjs.org", "registry.npmjs.org", 443, true),
            ("*.npmjs.org", "npmjs.org", 443, true),
            ("*.npmjs.org", "evilnpmjs.org", 443, false),
            ("github.com:22", "github.com", 22, true),
            ("github.com:22", "github.com", 443, false),
            ("127.0.0.1:8080", "127.0.0.1", 8080, true),
            ("127.0.0.1:8080", "127.0.0.1", 8081, false),
            ("localhost:8080", "127.0.0.1", 8080, false),
        ];
        for (r, host, port, want) in cases {
            assert_eq!(rule(r).allows(host, port), want, "{r} vs {host}:{port}");
        }
    }

    #[test]
    fn loopback_rules_name_a_port_to_forward() {
        let cases = [
            ("127.0.0.1:8080", Some(8080)),
            ("localhost:9", Some(9)),
            ("[::1]:7", Some(7)),
            ("127.0.0.1", None),
            ("example.com:8080", None),
            ("10.0.0.1:80", None),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<HostRule>().unwrap().loopback(), want, "{text}");
        }
    }

    #[test]
    fn each_agent_reaches_its_own_api_and_where_it_is_pointed() {
        let names = |rules: Vec<HostRule>| -> Vec<String> {
            rules.into_iter().map(|r| r.to_string()).collect()
        };
        assert_eq!(
            names(agent_hosts(AgentKind::Claude, &[])),
            [
                "api.anthropic.com",
                "console.anthropic.com",
                "statsig.anthropic.com",
                "claude.ai",
                "platform.claude.com"
            ]
        );
        assert_eq!(
            names(agent_hosts(AgentKind::Codex, &[])),
            ["api.openai.com", "chatgpt.com", "auth.openai.com"]
        );
        assert!(agent_hosts(AgentKind::Program, &[]).is_empty());
        assert!(agent_hosts(AgentKind::None, &[]).is_empty());
        let pointed = agent_hosts(
            AgentKind::Claude,
            &[
                "http://127.0.0.1:4321/v1".into(),
                "https://user:pw@gw.example.com/x".into(),
                "ftp://nope".into(),
            ],
        );
        let pointed = names(pointed);
        assert!(
            pointed.contains(&"127.0.0.1:4321".to_string()),
            "{pointed:?}"
        );
        assert!(
            pointed.contains(&"gw.example.com:443".to_string()),
            "{pointed:?}"
        );
        assert_eq!(pointed.len(), 7, "{pointed:?}");
    }
}
