//! Which files kern must never commit: judged by path and by content.
//!
//! The one decision a reader must know: a file is judged on what git would store — its path
//! (case-insensitively, so `ID_RSA` and `Key.PEM` count; a few rules name a folder too, such as
//! `.aws/credentials`) and its whole content, read in [`SCAN_CHUNK`] pieces that overlap by
//! [`SCAN_OVERLAP`] bytes, so memory stays bounded however large the file and no secret can
//! hide beyond the first MiB. The token rules take gitleaks' default rule list as their
//! checklist, keeping the kinds with a distinctive shape (a prefix, a fixed layout); the rules
//! that need a keyword and an entropy guess (`generic-api-key`, JWTs, bare hex keys) are left
//! out, because a false alarm keeps the task's own file out of its commit. Patterns are byte
//! regexes with ASCII classes only, so binary files are scanned too.

use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use regex::bytes::{Regex, RegexSet};

/// How many bytes the content scan looks at in one piece (1 MiB).
pub(crate) const SCAN_CHUNK: usize = 1 << 20;

/// How many bytes of one piece are scanned again with the next: longer than any rule's
/// shortest match, so a secret cut by a piece boundary is still found whole in one piece.
pub(crate) const SCAN_OVERLAP: usize = 4 << 10;

/// Why a file is sensitive; [`std::fmt::Display`] gives the reason kern prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finding {
    /// The path matches a pattern (the pattern is given, e.g. `*.pem`).
    Name(&'static str),
    /// The content holds a secret of this kind (e.g. `a GitHub token`).
    Content(&'static str),
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Name(pattern) => write!(f, "sensitive file name ({pattern})"),
            Finding::Content(PRIVATE_KEY) => write!(f, "holds a private key block"),
            Finding::Content(kind) => write!(f, "looks like {kind}"),
        }
    }
}

const PRIVATE_KEY: &str = "a private key block";

/// A path rule: how the lower-cased path (or its last part) is matched.
enum NameRule {
    Exact(&'static str),
    Prefix(&'static str),
    Suffix(&'static str),
    PrefixSuffix(&'static str, &'static str),
    /// The path ends with these components (`.aws/credentials`).
    Path(&'static str),
}

/// The path rules, each with the pattern shown to the person: DESIGN.md section 8's list, then
/// credential files of well-known tools (git, AWS, Docker, Kubernetes, PostgreSQL, MySQL,
/// Terraform, PuTTY, Java and KeePass key stores, HashiCorp Vault, s3cmd, Apache).
const NAME_RULES: &[(NameRule, &str)] = &[
    (NameRule::Exact(".env"), ".env"),
    (NameRule::Prefix(".env."), ".env.*"),
    (NameRule::Suffix(".pem"), "*.pem"),
    (NameRule::Suffix(".key"), "*.key"),
    (NameRule::Prefix("id_rsa"), "id_rsa*"),
    (NameRule::Prefix("id_ed25519"), "id_ed25519*"),
    (NameRule::Prefix("id_ecdsa"), "id_ecdsa*"),
    (NameRule::Prefix("id_dsa"), "id_dsa*"),
    (NameRule::Suffix(".p12"), "*.p12"),
    (NameRule::Suffix(".pfx"), "*.pfx"),
    (NameRule::Exact(".npmrc"), ".npmrc"),
    (NameRule::Exact(".pypirc"), ".pypirc"),
    (NameRule::Exact(".netrc"), ".netrc"),
    (NameRule::Exact("_netrc"), "_netrc"),
    (
        NameRule::PrefixSuffix("credentials", ".json"),
        "credentials*.json",
    ),
    (NameRule::Exact(".git-credentials"), ".git-credentials"),
    (NameRule::Path(".aws/credentials"), ".aws/credentials"),
    (NameRule::Path(".docker/config.json"), ".docker/config.json"),
    (NameRule::Exact(".dockercfg"), ".dockercfg"),
    (NameRule::Path(".kube/config"), ".kube/config"),
    (NameRule::Exact("kubeconfig"), "kubeconfig"),
    (NameRule::Suffix(".kubeconfig"), "*.kubeconfig"),
    (NameRule::Exact(".pgpass"), ".pgpass"),
    (NameRule::Exact(".my.cnf"), ".my.cnf"),
    (NameRule::Suffix(".tfstate"), "*.tfstate"),
    (NameRule::Suffix(".tfstate.backup"), "*.tfstate.backup"),
    (NameRule::Suffix(".ppk"), "*.ppk"),
    (NameRule::Suffix(".jks"), "*.jks"),
    (NameRule::Suffix(".keystore"), "*.keystore"),
    (NameRule::Suffix(".kdbx"), "*.kdbx"),
    (NameRule::Exact(".vault-token"), ".vault-token"),
    (NameRule::Exact(".s3cfg"), ".s3cfg"),
    (NameRule::Exact(".htpasswd"), ".htpasswd"),
];

/// Endings of `.env.*` files meant to be committed: they document the variables, hold no values.
const ENV_EXAMPLES: &[&str] = &[
    ".example",
    ".sample",
    ".template",
    ".dist",
    ".defaults",
    ".schema",
];

/// Judges a path (relative to the top, `/`-separated, or absolute) by name.
pub(crate) fn sensitive_name(path: &Path) -> Option<Finding> {
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    if name.starts_with(".env") && ENV_EXAMPLES.iter().any(|e| name.ends_with(e)) {
        return None;
    }
    let full = path.to_string_lossy().to_ascii_lowercase();
    NAME_RULES.iter().find_map(|(rule, shown)| {
        let hit = match rule {
            NameRule::Exact(s) => name == *s,
            NameRule::Prefix(p) => name.starts_with(p),
            NameRule::Suffix(s) => name.ends_with(s) && name.len() > s.len(),
            NameRule::PrefixSuffix(p, s) => {
                name.starts_with(p) && name.ends_with(s) && name.len() >= p.len() + s.len()
            }
            NameRule::Path(p) => {
                full == *p || full.strip_suffix(p).is_some_and(|rest| rest.ends_with('/'))
            }
        };
        hit.then_some(Finding::Name(shown))
    })
}

/// The token rules, in the order they are tried (Anthropic before the wider OpenAI one).
const TOKEN_RULES: &[(&str, &str)] = &[
    (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        PRIVATE_KEY,
    ),
    (r"PuTTY-User-Key-File-[0-9]+: ", "a PuTTY private key"),
    (r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b", "an age secret key"),
    // Cloud providers.
    (
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        "an AWS access key",
    ),
    (
        r#"(?i)\baws_secret_access_key\b["']?\s*[=:]\s*["']?[A-Za-z0-9/+=]{40}"#,
        "an AWS secret access key",
    ),
    (
        r"\bABSK[A-Za-z0-9+/]{109,269}={0,2}",
        "an Amazon Bedrock API key",
    ),
    (r"\bAIza[0-9A-Za-z_-]{35}", "a Google API key"),
    (
        r"\bGOCSPX-[0-9A-Za-z_-]{28}",
        "a Google OAuth client secret",
    ),
    (
        r"(?:^|[\\'`\x22\s>=:(,)])[a-zA-Z0-9_~.]{3}[0-9]Q~[a-zA-Z0-9_~.-]{31,34}(?:$|[\\'`\x22\s<),])",
        "an Azure AD client secret",
    ),
    (r"\bLTAI[A-Za-z0-9]{20}\b", "an Alibaba Cloud access key"),
    (r"\bdo[opr]_v1_[a-f0-9]{64}\b", "a DigitalOcean token"),
    (
        r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        "a Cloudflare origin CA key",
    ),
    (
        r"\b(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3})",
        "a Fly.io token",
    ),
    (r"\bHRKU-AA[0-9a-zA-Z_-]{58}", "a Heroku API key"),
    (
        r"\b[a-z0-9]{14}\.atlasv1\.[a-z0-9_=-]{60,70}",
        "a Terraform Cloud token",
    ),
    (
        r"\b(?:hvs\.[A-Za-z0-9_-]{90,120}|hvb\.[A-Za-z0-9_-]{138,300})",
        "a HashiCorp Vault token",
    ),
    (r"\bdapi[a-f0-9]{32}(?:-[0-9])?\b", "a Databricks token"),
    (r"\bpul-[a-f0-9]{40}\b", "a Pulumi token"),
    (r"\bdp\.pt\.[a-zA-Z0-9]{43}", "a Doppler token"),
    (
        r"\bpscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}",
        "a PlanetScale token",
    ),
    (r"\bsha256~[A-Za-z0-9_-]{43}\b", "an OpenShift token"),
    (r"\btk-us-[A-Za-z0-9_-]{48}\b", "a Scalingo token"),
    (r"\bdckr_pat_[A-Za-z0-9_-]{27}", "a Docker Hub token"),
    // Code hosts and package registries.
    (r"\bgh[pousr]_[A-Za-z0-9]{36}\b", "a GitHub token"),
    (r"\bgithub_pat_[A-Za-z0-9_]{22,}", "a GitHub token"),
    (
        r"\bgl(?:pat|cbt|dt|ft|imt|oas|ptt|rt|soat|ffct|agent)-[A-Za-z0-9_.-]{20,}",
        "a GitLab token",
    ),
    (r"\bGR1348941[A-Za-z0-9_-]{20}", "a GitLab token"),
    (r"_gitlab_session=[0-9a-z]{32}", "a GitLab session cookie"),
    (r"\bATATT3[A-Za-z0-9_=-]{186}", "an Atlassian API token"),
    (
        r"\bsgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}\b",
        "a Sourcegraph token",
    ),
    (r"(?i)\bnpm_[a-z0-9]{36}\b", "an npm token"),
    (r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", "a PyPI token"),
    (r"\brubygems_[a-f0-9]{48}\b", "a RubyGems token"),
    (r"(?i)\bCLOJARS_[a-z0-9]{60}\b", "a Clojars token"),
    (
        r#"(?i)key\s*=\s*"ClearTextPassword"\s+value\s*=\s*"[^"]+""#,
        "a NuGet password",
    ),
    (
        r"\b(?:AKCp[A-Za-z0-9]{69}|cmVmd[A-Za-z0-9]{59})\b",
        "a JFrog Artifactory token",
    ),
    (
        r"https?://[a-f0-9]{8}:[a-f0-9]{8}@(?:gems|enterprise)\.contribsys\.com",
        "a Sidekiq credential",
    ),
    // AI providers.
    (r"\bsk-ant-[A-Za-z0-9_-]{20,}", "an Anthropic API key"),
    // Project, service-account and admin keys carry `-` and `_`; the legacy form is plain
    // alphanumerics. Requiring length keeps CSS-like names (`sk-spinner-…`) out.
    (
        r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}",
        "an OpenAI API key",
    ),
    (r"\bsk-[A-Za-z0-9]{32,}\b", "an OpenAI API key"),
    (
        r"\b(?:hf_[A-Za-z]{34}|api_org_[A-Za-z]{34})\b",
        "a Hugging Face token",
    ),
    (r"\bpplx-[A-Za-z0-9]{48}\b", "a Perplexity API key"),
    // Payments and commerce.
    (
        r"\b(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}\b",
        "a Stripe key",
    ),
    (r"\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,60}", "a Square token"),
    (r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", "a Shopify token"),
    (
        r"\baccess-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
        "a Plaid access token",
    ),
    (
        r"\bshippo_(?:live|test)_[a-fA-F0-9]{40}\b",
        "a Shippo token",
    ),
    (
        r"\bduffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
        "a Duffel token",
    ),
    (r"\bEZ[AT]K[a-zA-Z0-9]{54}", "an EasyPost key"),
    (
        r"\bFLW(?:PUBK|SECK)_TEST-[a-hA-H0-9]{32}-X|\bFLWSECK_TEST[a-hA-H0-9]{12}",
        "a Flutterwave key",
    ),
    // Messaging, mail and collaboration.
    (r"\bxox[baprse]-[A-Za-z0-9-]{10,}", "a Slack token"),
    (r"\bxoxe\.xox[bp]-[0-9]-[A-Z0-9]{163,166}", "a Slack token"),
    (r"\bxapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+", "a Slack token"),
    (
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
        "a Slack webhook",
    ),
    (
        r"(?i)https://[a-z0-9]+\.webhook\.office\.com/webhookb2/[a-z0-9-]{36}@[a-z0-9-]{36}/IncomingWebhook/[a-z0-9]{32}/[a-z0-9-]{36}",
        "a Microsoft Teams webhook",
    ),
    (
        r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        "a SendGrid API key",
    ),
    (
        r"\bxkeysib-[a-f0-9]{64}-[a-zA-Z0-9]{16}\b",
        "a Brevo (Sendinblue) API key",
    ),
    (r"\b[a-f0-9]{32}-us[0-9]{1,2}\b", "a Mailchimp API key"),
    (r"\bSK[0-9a-fA-F]{32}\b", "a Twilio API key"),
    (r"\blin_api_[a-zA-Z0-9]{40}\b", "a Linear API key"),
    (r"\bntn_[0-9]{11}[A-Za-z0-9]{35}\b", "a Notion token"),
    (r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", "a Postman API key"),
    (r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}\b", "an Airtable token"),
    (r"\brdme_[a-z0-9]{70}\b", "a ReadMe API key"),
    (r"\bfio-u-[A-Za-z0-9_=-]{64}", "a Frame.io token"),
    (
        r"\bA3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}\b",
        "a 1Password secret key",
    ),
    (r"\bops_eyJ[a-zA-Z0-9+/]{250,}={0,3}", "a 1Password token"),
    // Monitoring and developer tools.
    (
        r"\b(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|eyJrIjoi[A-Za-z0-9]{70,400}={0,2})",
        "a Grafana token",
    ),
    (
        r"\b(?:NRAK-[a-zA-Z0-9]{27}|NRJS-[a-f0-9]{19}|NRII-[a-zA-Z0-9_-]{32})\b",
        "a New Relic key",
    ),
    (
        r"\b(?:sntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,200}|sntryu_[a-f0-9]{64}\b)",
        "a Sentry token",
    ),
    (
        r"\bdt0c01\.[a-zA-Z0-9]{24}\.[a-zA-Z0-9]{64}",
        "a Dynatrace token",
    ),
    (r"\bico-[a-zA-Z0-9]{32}\b", "an Infracost token"),
    (r"\bpnu_[a-zA-Z0-9]{36}\b", "a Prefect token"),
    (r"\bAPI-[A-Z0-9]{26}\b", "an Octopus Deploy key"),
    (
        r"\bsm_(?:aat|pat|sat)_[a-zA-Z0-9]{16}\b",
        "a SettleMint token",
    ),
    (
        r"\b(?:pat|sat)\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9]{24}\.[a-zA-Z0-9]{20}\b",
        "a Harness token",
    ),
    (
        r"\b[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk\b",
        "a MaxMind license key",
    ),
    (
        r"\bsk\.eyJ[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,}",
        "a Mapbox secret token",
    ),
    (r"\bsl\.[A-Za-z0-9_=-]{135}", "a Dropbox token"),
    (
        r"\bAAAAAAAAAAAAAAAAAAAAA[%A-Za-z0-9]{30,}",
        "a Twitter bearer token",
    ),
    (r"\bEAA[MC][a-zA-Z0-9]{100,}", "a Facebook access token"),
];

/// Rules that need two things anywhere in one file: a sign of the file's kind, and a value.
const PAIRED_RULES: &[(&str, &str, &str)] = &[
    (
        r"(?m)^kind:\s*[\x22']?Config\b",
        r"(?m)^\s*-?\s*(?:token|client-key-data|id-token|refresh-token|password):\s*[\x22']?[A-Za-z0-9._~+/=:-]{16,}",
        "a kubeconfig credential",
    ),
    (
        r#""auths"\s*:"#,
        r#""(?:auth|identitytoken)"\s*:\s*"[A-Za-z0-9+/=_.-]{8,}""#,
        "a Docker registry credential",
    ),
];

/// The compiled rules: one set for a single pass over each piece, then the kinds.
struct Rules {
    tokens: RegexSet,
    paired: Vec<(Regex, Regex, &'static str)>,
}

fn rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| {
        // The patterns are constants covered by the unit tests; were one not to compile, the
        // set would fall back to an empty one rather than panic at run time.
        let tokens = RegexSet::new(TOKEN_RULES.iter().map(|(p, _)| format!("(?-u){p}")))
            .unwrap_or_else(|_| RegexSet::empty());
        let paired = PAIRED_RULES
            .iter()
            .filter_map(|(sign, value, kind)| {
                let sign = Regex::new(&format!("(?-u){sign}")).ok()?;
                let value = Regex::new(&format!("(?-u){value}")).ok()?;
                Some((sign, value, *kind))
            })
            .collect();
        Rules { tokens, paired }
    })
}

/// A streaming content judge: feed it a file piece by piece, then ask for the finding.
pub(crate) struct Scanner {
    /// The piece being filled: the overlap from the last piece, then new bytes.
    buffer: Vec<u8>,
    /// Per paired rule: the sign and the value seen so far.
    paired: Vec<(bool, bool)>,
    found: Option<Finding>,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new()
    }
}

impl Scanner {
    /// A scanner that has seen nothing.
    pub(crate) fn new() -> Scanner {
        Scanner {
            buffer: Vec::new(),
            paired: vec![(false, false); rules().paired.len()],
            found: None,
        }
    }

    /// Takes the next bytes of the file.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.found.is_none() {
            let room = SCAN_CHUNK.saturating_sub(self.buffer.len()).max(1);
            let take = room.min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buffer.len() >= SCAN_CHUNK {
                self.scan_buffer();
                let keep = self.buffer.len() - SCAN_OVERLAP;
                self.buffer.drain(..keep);
            }
        }
    }

    /// Scans what is left and returns the first finding.
    pub(crate) fn finish(mut self) -> Option<Finding> {
        if self.found.is_none() && !self.buffer.is_empty() {
            self.scan_buffer();
        }
        self.found
    }

    fn scan_buffer(&mut self) {
        let rules = rules();
        if let Some(i) = rules.tokens.matches(&self.buffer).iter().next() {
            self.found = Some(Finding::Content(TOKEN_RULES[i].1));
            return;
        }
        for ((sign, value, kind), seen) in rules.paired.iter().zip(self.paired.iter_mut()) {
            seen.0 = seen.0 || sign.is_match(&self.buffer);
            seen.1 = seen.1 || value.is_match(&self.buffer);
            if seen.0 && seen.1 {
                self.found = Some(Finding::Content(kind));
                return;
            }
        }
    }
}

/// Judges bytes by content (all of them).
pub(crate) fn sensitive_content(bytes: &[u8]) -> Option<Finding> {
    let mut scanner = Scanner::new();
    scanner.feed(bytes);
    scanner.finish()
}

/// Judges a stream by content, reading it to its end in bounded pieces.
pub(crate) fn scan_reader(mut reader: impl Read) -> std::io::Result<Option<Finding>> {
    let mut scanner = Scanner::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(scanner.finish()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        scanner.feed(&buf[..n]);
        if scanner.found.is_some() {
            return Ok(scanner.finish());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn names_follow_the_design_list_and_the_credential_files() {
        let cases: &[(&str, Option<&str>)] = &[
            (".env", Some(".env")),
            ("config/.env", Some(".env")),
            (".env.local", Some(".env.*")),
            (".env.production", Some(".env.*")),
            (".env.example", None),
            (".env.sample", None),
            (".env.template", None),
            (".env.dist", None),
            (".env.local.example", None),
            ("server.pem", Some("*.pem")),
            ("Key.PEM", Some("*.pem")),
            ("tls.key", Some("*.key")),
            ("id_rsa", Some("id_rsa*")),
            ("id_rsa.pub", Some("id_rsa*")),
            ("ID_RSA", Some("id_rsa*")),
            ("id_ed25519", Some("id_ed25519*")),
            ("id_ecdsa", Some("id_ecdsa*")),
            ("cert.p12", Some("*.p12")),
            ("cert.pfx", Some("*.pfx")),
            (".npmrc", Some(".npmrc")),
            (".pypirc", Some(".pypirc")),
            (".netrc", Some(".netrc")),
            ("credentials.json", Some("credentials*.json")),
            ("credentials-prod.json", Some("credentials*.json")),
            (".git-credentials", Some(".git-credentials")),
            (".aws/credentials", Some(".aws/credentials")),
            ("home/.aws/credentials", Some(".aws/credentials")),
            ("aws/credentials", None),
            ("credentials", None),
            (".docker/config.json", Some(".docker/config.json")),
            ("docker/config.json", None),
            (".kube/config", Some(".kube/config")),
            ("kubeconfig", Some("kubeconfig")),
            ("prod.kubeconfig", Some("*.kubeconfig")),
            (".pgpass", Some(".pgpass")),
            ("infra/terraform.tfstate", Some("*.tfstate")),
            ("terraform.tfstate.backup", Some("*.tfstate.backup")),
            ("deploy.ppk", Some("*.ppk")),
            ("release.jks", Some("*.jks")),
            ("debug.keystore", Some("*.keystore")),
            ("vault.kdbx", Some("*.kdbx")),
            (".htpasswd", Some(".htpasswd")),
            ("src/main.rs", None),
            ("environment.md", None),
            (".envrc", None),
            ("keyboard.rs", None),
            ("monkey.json", None),
            ("credentials.yaml", None),
            (".key", None),
            ("tfstate.md", None),
        ];
        for (path, want) in cases {
            let got = sensitive_name(Path::new(path));
            assert_eq!(got, want.map(Finding::Name), "{path}");
        }
    }

    /// One sample per token rule (built at run time so this file holds no real-looking
    /// secret), then look-alikes that must pass.
    fn samples() -> Vec<(String, Option<&'static str>)> {
        let r = |c: &str, n: usize| c.repeat(n);
        vec![
            (
                format!("x\n-----BEGIN {}-----\nMII\n", "RSA PRIVATE KEY"),
                Some(PRIVATE_KEY),
            ),
            (
                format!("-----BEGIN {}-----", "OPENSSH PRIVATE KEY"),
                Some(PRIVATE_KEY),
            ),
            (
                format!("-----BEGIN {}-----", "PGP PRIVATE KEY BLOCK"),
                Some(PRIVATE_KEY),
            ),
            (
                format!("{}-User-Key-File-3: ssh-ed25519\n", "PuTTY"),
                Some("a PuTTY private key"),
            ),
            (
                format!("AGE-SECRET-KEY-1{}", r("Q", 58)),
                Some("an age secret key"),
            ),
            (
                format!("aws = \"AKIA{}\"", r("Q", 16)),
                Some("an AWS access key"),
            ),
            (format!("ASIA{}", r("Z", 16)), Some("an AWS access key")),
            (
                format!("aws_secret_access_key = {}", r("aB3/", 10)),
                Some("an AWS secret access key"),
            ),
            (
                format!("ABSK{}", r("a", 120)),
                Some("an Amazon Bedrock API key"),
            ),
            (format!("key: AIza{}", r("b", 35)), Some("a Google API key")),
            (
                format!("GOCSPX-{}", r("c", 28)),
                Some("a Google OAuth client secret"),
            ),
            (
                format!("\"abc8Q~{}\"", r("d", 32)),
                Some("an Azure AD client secret"),
            ),
            (
                format!("LTAI{}", r("e", 20)),
                Some("an Alibaba Cloud access key"),
            ),
            (
                format!("dop_v1_{}", r("a", 64)),
                Some("a DigitalOcean token"),
            ),
            (
                format!("v1.0-{}-{}", r("a", 24), r("b", 146)),
                Some("a Cloudflare origin CA key"),
            ),
            (format!("fo1_{}", r("f", 43)), Some("a Fly.io token")),
            (format!("HRKU-AA{}", r("g", 58)), Some("a Heroku API key")),
            (
                format!("{}.atlasv1.{}", r("h", 14), r("i", 64)),
                Some("a Terraform Cloud token"),
            ),
            (
                format!("hvs.{}", r("j", 95)),
                Some("a HashiCorp Vault token"),
            ),
            (format!("dapi{}", r("a", 32)), Some("a Databricks token")),
            (format!("pul-{}", r("b", 40)), Some("a Pulumi token")),
            (format!("dp.pt.{}", r("k", 43)), Some("a Doppler token")),
            (
                format!("pscale_tkn_{}", r("l", 40)),
                Some("a PlanetScale token"),
            ),
            (format!("sha256~{}", r("m", 43)), Some("an OpenShift token")),
            (format!("tk-us-{}", r("n", 48)), Some("a Scalingo token")),
            (
                format!("dckr_pat_{}", r("o", 27)),
                Some("a Docker Hub token"),
            ),
            (format!("token: ghp_{}", r("a", 36)), Some("a GitHub token")),
            (format!("ghr_{}", r("d", 36)), Some("a GitHub token")),
            (
                format!("github_pat_{}", r("A1_", 30)),
                Some("a GitHub token"),
            ),
            (format!("glpat-{}", r("p", 20)), Some("a GitLab token")),
            (format!("glrt-{}", r("q", 20)), Some("a GitLab token")),
            (format!("GR1348941{}", r("r", 20)), Some("a GitLab token")),
            (
                format!("_gitlab_session={}", r("a", 32)),
                Some("a GitLab session cookie"),
            ),
            (
                format!("ATATT3{}", r("s", 186)),
                Some("an Atlassian API token"),
            ),
            (
                format!("sgp_local_{}", r("a", 40)),
                Some("a Sourcegraph token"),
            ),
            (
                format!("//registry/:_authToken=npm_{}", r("t", 36)),
                Some("an npm token"),
            ),
            (
                format!("pypi-AgEIcHlwaS5vcmc{}", r("u", 50)),
                Some("a PyPI token"),
            ),
            (format!("rubygems_{}", r("a", 48)), Some("a RubyGems token")),
            (format!("CLOJARS_{}", r("v", 60)), Some("a Clojars token")),
            (
                "<add key=\"ClearTextPassword\" value=\"hunter2\" />".to_string(),
                Some("a NuGet password"),
            ),
            (
                format!("AKCp{}", r("w", 69)),
                Some("a JFrog Artifactory token"),
            ),
            (
                format!("https://{}:{}@gems.contribsys.com/", r("a", 8), r("b", 8)),
                Some("a Sidekiq credential"),
            ),
            (
                format!("key=sk-ant-api03-{}", r("xY", 40)),
                Some("an Anthropic API key"),
            ),
            (
                format!("sk-proj-{}", r("aB_-", 30)),
                Some("an OpenAI API key"),
            ),
            (format!("sk-{}", r("a1", 24)), Some("an OpenAI API key")),
            (
                format!("HF_TOKEN=hf_{}", r("x", 34)),
                Some("a Hugging Face token"),
            ),
            (
                format!("api_org_{}", r("y", 34)),
                Some("a Hugging Face token"),
            ),
            (format!("pplx-{}", r("z", 48)), Some("a Perplexity API key")),
            (
                format!("STRIPE=sk_live_{}", r("A", 24)),
                Some("a Stripe key"),
            ),
            (format!("rk_test_{}", r("B", 24)), Some("a Stripe key")),
            (format!("sq0atp-{}", r("C", 22)), Some("a Square token")),
            (format!("shpat_{}", r("a", 32)), Some("a Shopify token")),
            (
                format!(
                    "access-sandbox-{}-{}-{}-{}-{}",
                    r("a", 8),
                    r("b", 4),
                    r("c", 4),
                    r("d", 4),
                    r("e", 12)
                ),
                Some("a Plaid access token"),
            ),
            (
                format!("shippo_live_{}", r("a", 40)),
                Some("a Shippo token"),
            ),
            (
                format!("duffel_live_{}", r("D", 43)),
                Some("a Duffel token"),
            ),
            (format!("EZAK{}", r("E", 54)), Some("an EasyPost key")),
            (
                format!("FLWSECK_TEST-{}-X", r("a", 32)),
                Some("a Flutterwave key"),
            ),
            (format!("xoxb-{}", r("12-", 10)), Some("a Slack token")),
            (
                format!("xapp-1-A{}-123-abc", r("B", 9)),
                Some("a Slack token"),
            ),
            (
                format!("https://hooks.slack.com/services/{}", r("T0/", 15)),
                Some("a Slack webhook"),
            ),
            (
                format!(
                    "https://x.webhook.office.com/webhookb2/{}@{}/IncomingWebhook/{}/{}",
                    r("a", 36),
                    r("b", 36),
                    r("c", 32),
                    r("d", 36)
                ),
                Some("a Microsoft Teams webhook"),
            ),
            (
                format!("SG.{}.{}", r("F", 22), r("G", 43)),
                Some("a SendGrid API key"),
            ),
            (
                format!("xkeysib-{}-{}", r("a", 64), r("H", 16)),
                Some("a Brevo (Sendinblue) API key"),
            ),
            (format!("{}-us12", r("b", 32)), Some("a Mailchimp API key")),
            (format!("SK{}", r("c", 32)), Some("a Twilio API key")),
            (format!("lin_api_{}", r("I", 40)), Some("a Linear API key")),
            (
                format!("ntn_{}{}", r("1", 11), r("J", 35)),
                Some("a Notion token"),
            ),
            (
                format!("PMAK-{}-{}", r("a", 24), r("b", 34)),
                Some("a Postman API key"),
            ),
            (
                format!("pat{}.{}", r("K", 14), r("c", 64)),
                Some("an Airtable token"),
            ),
            (format!("rdme_{}", r("a", 70)), Some("a ReadMe API key")),
            (format!("fio-u-{}", r("L", 64)), Some("a Frame.io token")),
            (
                format!(
                    "A3-{}-{}-{}-{}-{}",
                    r("M", 6),
                    r("N", 11),
                    r("O", 5),
                    r("P", 5),
                    r("Q", 5)
                ),
                Some("a 1Password secret key"),
            ),
            (format!("ops_eyJ{}", r("R", 250)), Some("a 1Password token")),
            (
                format!("glsa_{}_{}", r("S", 32), r("a", 8)),
                Some("a Grafana token"),
            ),
            (format!("NRAK-{}", r("T", 27)), Some("a New Relic key")),
            (format!("sntryu_{}", r("a", 64)), Some("a Sentry token")),
            (
                format!("dt0c01.{}.{}", r("U", 24), r("V", 64)),
                Some("a Dynatrace token"),
            ),
            (format!("ico-{}", r("W", 32)), Some("an Infracost token")),
            (format!("pnu_{}", r("X", 36)), Some("a Prefect token")),
            (format!("API-{}", r("Y", 26)), Some("an Octopus Deploy key")),
            (format!("sm_pat_{}", r("Z", 16)), Some("a SettleMint token")),
            (
                format!("pat.{}.{}.{}", r("a", 22), r("b", 24), r("c", 20)),
                Some("a Harness token"),
            ),
            (
                format!("{}_{}_mmk", r("d", 6), r("e", 29)),
                Some("a MaxMind license key"),
            ),
            (
                format!("sk.eyJ{}.{}", r("f", 60), r("g", 22)),
                Some("a Mapbox secret token"),
            ),
            (format!("sl.{}", r("h", 135)), Some("a Dropbox token")),
            (
                format!("AAAAAAAAAAAAAAAAAAAAA{}", r("i", 40)),
                Some("a Twitter bearer token"),
            ),
            (
                format!("EAAM{}", r("j", 100)),
                Some("a Facebook access token"),
            ),
            (
                format!(
                    "apiVersion: v1\nkind: Config\nusers:\n- name: ci\n  user:\n    token: {}\n",
                    r("k8sToken", 4)
                ),
                Some("a kubeconfig credential"),
            ),
            (
                format!(
                    "{{\"auths\": {{\"ghcr.io\": {{\"auth\": \"{}\"}}}}}}",
                    r("dXNlcjpwYXNz", 2)
                ),
                Some("a Docker registry credential"),
            ),
            // Look-alikes that must pass.
            ("-----BEGIN PUBLIC KEY-----".to_string(), None),
            (format!("AKIA{}", r("Q", 15)), None),
            (format!("ghp_{}", r("a", 20)), None),
            (
                "class=\"sk-loading-spinner-container-wrapper\"".into(),
                None,
            ),
            ("task-abcdefghijklmnopqrstuvwxyz0123456789".into(), None),
            ("sk_live_short".into(), None),
            ("npm_config_cache=/tmp".into(), None),
            ("kind: Config\nclusters: []\n".into(), None),
            ("token: ${{ secrets.GITHUB_TOKEN }}\n".into(), None),
            ("{\"auths\": {\"ghcr.io\": {}}}".into(), None),
            (
                "postgres://postgres:postgres@localhost:5432/db".into(),
                None,
            ),
            ("plain source code\nfn main() {}\n".into(), None),
        ]
    }

    #[test]
    fn contents_with_secrets_are_found_and_ordinary_text_is_not() {
        for (text, want) in samples() {
            assert_eq!(
                sensitive_content(text.as_bytes()),
                want.map(Finding::Content),
                "{text}"
            );
        }
    }

    #[test]
    fn every_rule_compiles_and_has_a_sample() {
        assert_eq!(rules().tokens.len(), TOKEN_RULES.len());
        assert_eq!(rules().paired.len(), PAIRED_RULES.len());
        let kinds: std::collections::BTreeSet<&str> =
            samples().into_iter().filter_map(|(_, k)| k).collect();
        let all = TOKEN_RULES
            .iter()
            .map(|(_, k)| *k)
            .chain(PAIRED_RULES.iter().map(|(_, _, k)| *k));
        for kind in all {
            assert!(kinds.contains(kind), "no sample for {kind}");
        }
    }

    #[test]
    fn reasons_read_as_sentences() {
        assert_eq!(
            Finding::Name(".env").to_string(),
            "sensitive file name (.env)"
        );
        assert_eq!(
            Finding::Content(PRIVATE_KEY).to_string(),
            "holds a private key block"
        );
        assert_eq!(
            Finding::Content("a GitHub token").to_string(),
            "looks like a GitHub token"
        );
    }

    #[test]
    fn a_whole_file_is_scanned_including_across_piece_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let token = format!("AKIA{}", "Z".repeat(16));
        // Far beyond the first MiB, and straddling each piece boundary in turn.
        for at in [
            0,
            SCAN_CHUNK - 10,
            SCAN_CHUNK - SCAN_OVERLAP + 3,
            3 * SCAN_CHUNK + 7,
        ] {
            let path = dir.path().join("big.bin");
            let mut bytes = vec![b' '; at];
            bytes.extend_from_slice(token.as_bytes());
            bytes.resize(at + 5 * SCAN_CHUNK, b'\n');
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(
                scan_reader(File::open(&path).unwrap()).unwrap(),
                Some(Finding::Content("an AWS access key")),
                "token at {at}"
            );
        }
        let clean = dir.path().join("clean.bin");
        std::fs::write(&clean, vec![b'a'; 3 * SCAN_CHUNK]).unwrap();
        assert_eq!(scan_reader(File::open(&clean).unwrap()).unwrap(), None);
    }

    #[test]
    fn a_paired_rule_needs_both_parts_even_far_apart() {
        let mut scanner = Scanner::new();
        scanner.feed(b"apiVersion: v1\nkind: Config\n");
        scanner.feed(&vec![b'#'; 3 * SCAN_CHUNK]);
        scanner.feed(format!("\n    token: {}\n", "t0ken".repeat(5)).as_bytes());
        assert_eq!(
            scanner.finish(),
            Some(Finding::Content("a kubeconfig credential"))
        );
    }
}
