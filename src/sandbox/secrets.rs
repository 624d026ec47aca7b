//! What the fence keeps from the agent: the person's secret files and folders (hidden), the
//! secrets in the environment (not passed), and what each agent kind may keep of its own
//! (its configuration folders, its API key). docs/safety.md prints these lists; change both.
//!
//! The one decision a reader must know: the lists name well-known places and names, and a
//! variable is judged by its name first (`*_TOKEN`, `*_SECRET`, `*_KEY`, `*PASSWORD*`, …) and
//! then by its value (a URL carrying a password, a private key block). Anything else passes, so
//! a toolchain still finds `PATH`, `HOME`, `LANG`, `CARGO_HOME` and its friends; the person
//! adds names with `[sandbox] hide` and lets a variable through with `pass_env`.

use super::hosts::AgentKind;

/// Secret files and folders under the home folder, hidden from every fenced process.
pub(crate) const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".config/rclone",
    ".config/doctl",
    ".config/containers/auth.json",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".oci",
    ".password-store",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    "snap/firefox",
    "snap/chromium",
    ".var/app/org.mozilla.firefox",
    ".var/app/com.google.Chrome",
    "Library/Keychains",
    "Library/Cookies",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Safari",
    "Library/Mail",
];

/// Secret files and sockets outside the home folder: host keys and password hashes (which a
/// kern running as root could otherwise read), and the sockets that give a process the
/// machine (a container engine, the person's ssh and gpg agents, their session bus).
pub(crate) const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/user",
];

/// The machine's temporary folders (`/dev/shm` is one, in memory): inside the fence each is an
/// empty one of the process's own.
pub(crate) const SYSTEM_TEMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Sockets and folders of the person's session in the temporary folders that would give a
/// process their terminal, their keys or their screen: tmux's and screen's servers, ssh
/// agents, X11. Matched by name prefix (`tmux-0`, `ssh-` and the random letters ssh-agent adds), hidden.
pub(crate) const TEMP_SESSIONS: &[&str] = &[
    "/tmp/tmux-",
    "/tmp/ssh-",
    "/tmp/.X11-unix",
    "/tmp/.ICE-unix",
    "/tmp/.XIM-unix",
    "/tmp/.font-unix",
    "/run/screen",
    "/var/run/screen",
];

/// Names of variables that are secrets whatever their value (besides the patterns of
/// [`is_secret_name`]).
const SECRET_NAMES: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DOCKER_HOST",
    "DOCKER_AUTH_CONFIG",
    "KUBECONFIG",
    "VAULT_TOKEN",
    "NPM_TOKEN",
    "NODE_AUTH_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "TWINE_PASSWORD",
];

/// True when a variable named `name` holds a secret by its name: one of the well-known ones,
/// or a name ending in `_TOKEN`, `_SECRET`, `_KEY`, `_PAT`, `_CREDENTIALS` or holding
/// `PASSWORD`, `PASSWD`, `PASSPHRASE` (case-insensitively).
pub(crate) fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || [
            "_TOKEN",
            "_SECRET",
            "_KEY",
            "_PAT",
            "_CREDENTIALS",
            "_SECRET_KEY",
        ]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
        || ["PASSWORD", "PASSWD", "PASSPHRASE", "SECRET_ACCESS"]
            .iter()
            .any(|part| upper.contains(part))
}

/// True when `value` carries a secret whatever its variable is called: a URL with a password
/// (`postgres://u:pw@db/x`) or a private key block.
pub(crate) fn is_secret_value(value: &str) -> bool {
    if value.contains("PRIVATE KEY-----") {
        return true;
    }
    value.split_whitespace().any(|word| {
        word.split_once("://").is_some_and(|(_, rest)| {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            authority
                .rsplit_once('@')
                .is_some_and(|(userinfo, _)| userinfo.contains(':'))
        })
    })
}

/// The variables an agent of `kind` needs although they look like secrets: its own API key or
/// login token. `codex_env_key` is the variable Codex's configured provider reads its key from
/// (`env_key` in its `config.toml`), when there is one.
pub(crate) fn agent_keys(kind: AgentKind, codex_env_key: Option<&str>) -> Vec<String> {
    let names: &[&str] = match kind {
        AgentKind::Claude => &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "AWS_BEARER_TOKEN_BEDROCK",
        ],
        AgentKind::Codex => &["CODEX_API_KEY", "OPENAI_API_KEY"],
        AgentKind::Program | AgentKind::None => &[],
    };
    let mut keys: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
    if kind == AgentKind::Codex
        && let Some(name) = codex_env_key.filter(|n| !n.is_empty())
        && !keys.iter().any(|k| k == name)
    {
        keys.push(name.to_string());
    }
    keys
}

/// The agent's own folders under the home folder, writable inside the fence: where its CLI
/// keeps its login, settings and session state. A `program:` agent has none.
pub(crate) fn agent_home_folders(kind: AgentKind) -> &'static [&'static str] {
    match kind {
        AgentKind::Claude => &[".claude", ".claude.json", ".config/claude", ".cache/claude"],
        AgentKind::Codex => &[".codex"],
        AgentKind::Program | AgentKind::None => &[],
    }
}

/// Caches of the common toolchains under the home folder: visible, and writable inside the
/// fence through a private layer that is thrown away after the stage, so a build works and
/// nothing the agent writes there reaches a later build of the person's.
pub(crate) const HOME_CACHES: &[&str] = &[
    ".cache",
    ".npm",
    ".cargo",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
    ".local/share/pnpm",
    ".yarn/berry/cache",
    ".bun/install/cache",
];

/// Variables that name a cache folder elsewhere: each one's folder is a private layer too.
pub(crate) const CACHE_VARIABLES: &[&str] = &[
    "XDG_CACHE_HOME",
    "PRE_COMMIT_HOME",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "GOMODCACHE",
    "GOCACHE",
    "PIP_CACHE_DIR",
    "YARN_CACHE_FOLDER",
    "UV_CACHE_DIR",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        let cases = [
            ("GITHUB_TOKEN", true),
            ("github_token", true),
            ("MY_SERVICE_TOKEN", true),
            ("STRIPE_SECRET", true),
            ("OPENAI_API_KEY", true),
            ("DB_PASSWORD", true),
            ("MYSQL_ROOT_PASSWORD_FILE", true),
            ("GPG_PASSPHRASE", true),
            ("AWS_ACCESS_KEY_ID", true),
            ("SSH_AUTH_SOCK", true),
            ("PATH", false),
            ("HOME", false),
            ("KEYBOARD", false),
            ("TOKENIZERS_PARALLELISM", false),
            ("CARGO_HOME", false),
            ("KERN_TASK", false),
            ("LANG", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_secret_name(name), want, "{name}");
        }
    }

    #[test]
    fn secret_values() {
        let cases = [
            ("postgres://app:hunter2@db:5432/x", true),
            ("https://user:pw@example.com/", true),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc", true),
            ("https://example.com/a@b", false),
            ("ssh://git@github.com/x", false),
            ("/usr/bin:/bin", false),
            ("plain", false),
        ];
        for (value, want) in cases {
            assert_eq!(is_secret_value(value), want, "{value}");
        }
    }

    #[test]
    fn each_agent_keeps_its_own_key() {
        assert!(agent_keys(AgentKind::Claude, None).contains(&"ANTHROPIC_API_KEY".into()));
        assert_eq!(
            agent_keys(AgentKind::Codex, Some("AZURE_OPENAI_API_KEY")),
            ["CODEX_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"]
        );
        assert!(agent_keys(AgentKind::Program, Some("X")).is_empty());
        assert!(agent_keys(AgentKind::None, None).is_empty());
    }
}
