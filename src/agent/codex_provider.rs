//! Which model provider Codex will use and what that provider needs before `codex exec` can
//! run: read from Codex's own `config.toml` in `CODEX_HOME` (default `~/.codex`), for
//! `kern doctor`.
//!
//! The one decision a reader must know: only the provider that `codex exec` would pick is
//! judged, the way Codex picks it — the selected profile's `model_provider`, else the top-level
//! `model_provider`, else `openai` — and a provider needs what Codex asks of it: the OpenAI
//! login (`openai`, or `requires_openai_auth = true`), the variable named by `env_key`, or
//! nothing (a custom provider with neither, such as a local server; the built-in `ollama` and
//! `lmstudio`). `codex login status` alone says "Not logged in" for every provider that is not
//! OpenAI's, which is why kern reads the configuration itself.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The provider Codex uses when the configuration names none.
pub(crate) const DEFAULT_PROVIDER: &str = "openai";

/// The variable `codex exec` reads an OpenAI API key from (codex-cli 0.169.0; it ignores
/// `OPENAI_API_KEY`, seen against a loopback mock).
pub(crate) const API_KEY_VAR: &str = "CODEX_API_KEY";

/// What a provider needs before Codex can call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The OpenAI login (`codex login`) or an API key in `CODEX_API_KEY` (`API_KEY_VAR`).
    OpenAiLogin,
    /// An API key in this environment variable (`env_key`).
    EnvKey(String),
    /// A bearer token written in `config.toml` (`experimental_bearer_token`).
    TokenInConfig,
    /// Nothing: a local or keyless server.
    Nothing,
}

/// The provider `codex exec` would use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexProvider {
    /// Its id: the key under `[model_providers]`, or a built-in one.
    pub id: String,
    /// Where it is reached, when the configuration or the built-in says.
    pub base_url: Option<String>,
    /// What it needs.
    pub credential: Credential,
}

/// The parts of `config.toml` that pick and describe the provider; everything else in the
/// file is Codex's business and ignored.
#[derive(Debug, Default, Deserialize)]
struct Config {
    model_provider: Option<String>,
    profile: Option<String>,
    openai_base_url: Option<String>,
    #[serde(default)]
    profiles: std::collections::BTreeMap<String, Profile>,
    #[serde(default)]
    model_providers: std::collections::BTreeMap<String, ProviderTable>,
}

#[derive(Debug, Default, Deserialize)]
struct Profile {
    model_provider: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ProviderTable {
    base_url: Option<String>,
    env_key: Option<String>,
    experimental_bearer_token: Option<String>,
    #[serde(default)]
    requires_openai_auth: bool,
}

/// Codex's home folder: `CODEX_HOME` when set and not empty, else `<home>/.codex`.
pub(crate) fn codex_home(codex_home_var: Option<&str>, home: Option<&Path>) -> Option<PathBuf> {
    match codex_home_var.filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => home.map(|h| h.join(".codex")),
    }
}

/// The provider configured in `config_toml` (the text of `config.toml`; `None` when the file
/// does not exist). `Err` is a message for the person: the TOML error, or a provider that is
/// named but not defined.
pub fn provider(config_toml: Option<&str>) -> Result<CodexProvider, String> {
    let config: Config = match config_toml {
        Some(text) => toml::from_str(text).map_err(|e| {
            let message = e.message().to_string();
            match e.span() {
                Some(span) => {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!("line {line}: {message}")
                }
                None => message,
            }
        })?,
        None => Config::default(),
    };
    let from_profile = config
        .profile
        .as_ref()
        .and_then(|p| config.profiles.get(p))
        .and_then(|p| p.model_provider.clone());
    let id = from_profile
        .or(config.model_provider.clone())
        .unwrap_or_else(|| DEFAULT_PROVIDER.to_string());
    if let Some(table) = config.model_providers.get(&id) {
        let credential = if table.requires_openai_auth {
            Credential::OpenAiLogin
        } else if let Some(var) = table.env_key.clone().filter(|v| !v.is_empty()) {
            Credential::EnvKey(var)
        } else if table.experimental_bearer_token.is_some() {
            Credential::TokenInConfig
        } else {
            Credential::Nothing
        };
        return Ok(CodexProvider {
            id,
            base_url: table.base_url.clone(),
            credential,
        });
    }
    match id.as_str() {
        "openai" => Ok(CodexProvider {
            id,
            base_url: config.openai_base_url,
            credential: Credential::OpenAiLogin,
        }),
        "ollama" | "lmstudio" => Ok(CodexProvider {
            base_url: Some(format!(
                "http://localhost:{}/v1",
                if id == "ollama" { 11434 } else { 1234 }
            )),
            id,
            credential: Credential::Nothing,
        }),
        _ => Err(format!(
            "`model_provider = \"{id}\"` names a provider that is not defined — add a `[model_providers.{id}]` table with its `base_url`, or use `openai`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider_of(id: &str, base_url: Option<&str>, credential: Credential) -> CodexProvider {
        CodexProvider {
            id: id.to_string(),
            base_url: base_url.map(str::to_string),
            credential,
        }
    }

    #[test]
    fn the_provider_codex_would_use_and_what_it_needs() {
        let table: Vec<(&str, Option<&str>, Result<CodexProvider, String>)> = vec![
            (
                "no config.toml",
                None,
                Ok(provider_of("openai", None, Credential::OpenAiLogin)),
            ),
            (
                "a config without a provider",
                Some("model = \"gpt-5-codex\"\n"),
                Ok(provider_of("openai", None, Credential::OpenAiLogin)),
            ),
            (
                "openai with its base url moved",
                Some("openai_base_url = \"http://127.0.0.1:9/v1\"\n"),
                Ok(provider_of(
                    "openai",
                    Some("http://127.0.0.1:9/v1"),
                    Credential::OpenAiLogin,
                )),
            ),
            (
                "a custom provider with no key: nothing needed",
                Some(
                    "model_provider = \"mock\"\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"http://127.0.0.1:8/v1\"\nwire_api = \"responses\"\n",
                ),
                Ok(provider_of(
                    "mock",
                    Some("http://127.0.0.1:8/v1"),
                    Credential::Nothing,
                )),
            ),
            (
                "a custom provider with env_key",
                Some(
                    "model_provider = \"azure\"\n[model_providers.azure]\nbase_url = \"https://x.openai.azure.com/openai\"\nenv_key = \"AZURE_OPENAI_API_KEY\"\n",
                ),
                Ok(provider_of(
                    "azure",
                    Some("https://x.openai.azure.com/openai"),
                    Credential::EnvKey("AZURE_OPENAI_API_KEY".into()),
                )),
            ),
            (
                "a custom provider that asks for the OpenAI login",
                Some(
                    "model_provider = \"proxy\"\n[model_providers.proxy]\nbase_url = \"https://proxy/v1\"\nrequires_openai_auth = true\nenv_key = \"X\"\n",
                ),
                Ok(provider_of(
                    "proxy",
                    Some("https://proxy/v1"),
                    Credential::OpenAiLogin,
                )),
            ),
            (
                "a bearer token in the file",
                Some(
                    "model_provider = \"t\"\n[model_providers.t]\nbase_url = \"https://t/v1\"\nexperimental_bearer_token = \"abc\"\n",
                ),
                Ok(provider_of("t", Some("https://t/v1"), Credential::TokenInConfig)),
            ),
            (
                "the selected profile's provider wins",
                Some(
                    "model_provider = \"openai\"\nprofile = \"local\"\n[profiles.local]\nmodel_provider = \"ollama\"\n",
                ),
                Ok(provider_of(
                    "ollama",
                    Some("http://localhost:11434/v1"),
                    Credential::Nothing,
                )),
            ),
            (
                "built-in lmstudio",
                Some("model_provider = \"lmstudio\"\n"),
                Ok(provider_of(
                    "lmstudio",
                    Some("http://localhost:1234/v1"),
                    Credential::Nothing,
                )),
            ),
            (
                "a provider named but not defined",
                Some("model_provider = \"nowhere\"\n"),
                Err("`model_provider = \"nowhere\"` names a provider that is not defined — add a `[model_providers.nowhere]` table with its `base_url`, or use `openai`".into()),
            ),
            (
                "broken TOML names its line",
                Some("model = \"a\"\nmodel_provider = \n"),
                Err("line 2: string values must be quoted, expected literal string".into()),
            ),
        ];
        for (what, text, expected) in table {
            assert_eq!(provider(text), expected, "{what}");
        }
    }

    #[test]
    fn codex_home_is_the_variable_else_dot_codex() {
        let home = Path::new("/home/p");
        let table = [
            (Some("/srv/codex"), Some(home), Some("/srv/codex")),
            (Some(""), Some(home), Some("/home/p/.codex")),
            (None, Some(home), Some("/home/p/.codex")),
            (None, None, None),
        ];
        for (var, home, expected) in table {
            assert_eq!(
                codex_home(var, home),
                expected.map(PathBuf::from),
                "{var:?}"
            );
        }
    }
}
