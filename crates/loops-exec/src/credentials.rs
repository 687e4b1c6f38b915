//! The inherited variables an account run must not see (SPEC §5.3 step 2.2,
//! widened by issue 12 §2): another identity's credentials, the files and
//! profiles that select one, and the tool homes that hold one.
//!
//! When a target runs under an account, every variable listed here is
//! removed from the base environment before the account's own variables
//! (from `accounts env`) are applied, so an agent can only log in as the
//! account, never as the owner of the runner. Without an account nothing is
//! removed (SPEC §5.3).
//!
//! This is the one list; the README's "Security" section repeats it. Each
//! entry says where it is documented. Variables that only pick an endpoint,
//! a region or a model (`ANTHROPIC_BASE_URL`, `AWS_REGION`,
//! `CLAUDE_CODE_USE_BEDROCK`, `GOOGLE_CLOUD_PROJECT`, …) carry no identity
//! and are kept: an account may rely on the runner's gateway or region.
//!
//! Beside it, [`DATABASE_STRIPPED`] is the one list of loops' own database
//! credentials (issue 25 §2), which no process loops starts ever inherits,
//! account or not.

/// Removed from an account run's inherited environment, in groups.
pub(crate) const ACCOUNT_STRIPPED: &[&str] = &[
    // Tool homes, where each provider CLI keeps its login (SPEC §5.3; the
    // `profile_dir_var` table in account.rs).
    "CLAUDE_CONFIG_DIR",    // Claude Code docs, "Environment variables"
    "CODEWITH_HOME",        // codewith, the codex fork (SPEC §5.3)
    "CODEX_HOME",           // Codex docs, "Environment variables": holds auth.json
    "CURSOR_CONFIG_DIR",    // Cursor CLI docs, "Environment variables"
    "OPENCODE_CONFIG_DIR",  // opencode docs, "Config": custom config directory
    "AICOPILOT_CONFIG_DIR", // aicopilot (SPEC §5.3)
    "GH_CONFIG_DIR",        // GitHub CLI manual, `gh help environment`: holds hosts.yml tokens
    "CLOUDSDK_CONFIG",      // Google Cloud SDK docs, gcloud config directory: holds its credentials
    // XDG base directories: opencode keeps `auth.json` under XDG_DATA_HOME,
    // Cursor its config under XDG_CONFIG_HOME (SPEC §5.3).
    "XDG_CONFIG_HOME", // XDG Base Directory Specification
    "XDG_DATA_HOME",   // XDG Base Directory Specification
    "XDG_STATE_HOME",  // XDG Base Directory Specification
    "XDG_CACHE_HOME",  // XDG Base Directory Specification
    // Anthropic (Claude Code docs, "Environment variables").
    "ANTHROPIC_API_KEY",        // sent as X-Api-Key
    "ANTHROPIC_AUTH_TOKEN",     // sent as `Authorization: Bearer`
    "ANTHROPIC_CUSTOM_HEADERS", // extra request headers; gateways put credentials here
    "CLAUDE_CODE_OAUTH_TOKEN",  // a subscription's long-lived token (`claude setup-token`)
    // Amazon Bedrock (Claude Code docs, "Amazon Bedrock"; AWS SDKs and Tools
    // reference guide, "Environment variables").
    "AWS_BEARER_TOKEN_BEDROCK",               // Bedrock API key
    "AWS_ACCESS_KEY_ID",                      // static credentials
    "AWS_SECRET_ACCESS_KEY",                  // static credentials
    "AWS_SESSION_TOKEN",                      // temporary credentials
    "AWS_PROFILE",                            // picks a named profile of the owner's
    "AWS_DEFAULT_PROFILE",                    // older name of AWS_PROFILE (AWS CLI)
    "AWS_SHARED_CREDENTIALS_FILE",            // where the owner's profiles are
    "AWS_CONFIG_FILE",                        // where the owner's profiles are
    "AWS_WEB_IDENTITY_TOKEN_FILE",            // web identity federation
    "AWS_ROLE_ARN",                           // web identity federation
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",     // container credential provider
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",      // container credential provider
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", // container credential provider
    // Google Vertex AI and Gemini (Google Cloud docs, "Application Default
    // Credentials"; Gemini CLI docs, "Authentication"; gcloud properties).
    "GOOGLE_APPLICATION_CREDENTIALS", // service account key file (ADC)
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", // gcloud auth/access_token_file
    "GEMINI_API_KEY",                 // Gemini API key (AI Studio)
    "GOOGLE_API_KEY",                 // Gemini API / Vertex AI express mode key
    "GOOGLE_GENAI_API_KEY",           // Google Gen AI SDK's own name for the key
    // OpenAI and Codex (OpenAI API docs; Codex docs, "Environment variables").
    "OPENAI_API_KEY",     // OpenAI API key
    "CODEX_API_KEY",      // API key of non-interactive `codex exec`
    "CODEX_ACCESS_TOKEN", // ChatGPT or Codex access token for automation
    // Azure OpenAI (Azure OpenAI docs; Azure Identity `EnvironmentCredential`
    // and `WorkloadIdentityCredential`).
    "AZURE_OPENAI_API_KEY",              // Azure OpenAI key
    "AZURE_OPENAI_AD_TOKEN",             // Entra ID token (OpenAI SDKs' Azure client)
    "AZURE_API_KEY",                     // LiteLLM's name for the Azure key
    "AZURE_CLIENT_ID",                   // service principal or managed identity
    "AZURE_TENANT_ID",                   // service principal
    "AZURE_CLIENT_SECRET",               // service principal secret
    "AZURE_CLIENT_CERTIFICATE_PATH",     // service principal certificate
    "AZURE_CLIENT_CERTIFICATE_PASSWORD", // service principal certificate
    "AZURE_USERNAME",                    // user password credential
    "AZURE_PASSWORD",                    // user password credential
    "AZURE_FEDERATED_TOKEN_FILE",        // workload identity
    // Other model routers the provider CLIs accept.
    "OPENROUTER_API_KEY", // OpenRouter docs (SPEC §5.3)
    "CURSOR_API_KEY",     // Cursor CLI docs, "Authentication"
    "CURSOR_AUTH_TOKEN",  // Cursor CLI docs, "Environment variables"
    // GitHub, for copilot-style tools (GitHub CLI manual, `gh help
    // environment`; GitHub Copilot CLI docs, "Authenticating").
    "COPILOT_GITHUB_TOKEN",    // Copilot CLI, checked first
    "GH_TOKEN",                // gh and Copilot CLI, github.com
    "GITHUB_TOKEN",            // gh and Copilot CLI, github.com
    "GH_ENTERPRISE_TOKEN",     // gh, GitHub Enterprise Server
    "GITHUB_ENTERPRISE_TOKEN", // gh, GitHub Enterprise Server
];

/// Loops' own database credentials (issue 25 §2): removed from the
/// inherited environment of every process loops starts, with or without an
/// account: runs, workflow steps, agents, `accounts env`, hooks, and the
/// probes of `doctor` and `preflight`. A daemon on PostgreSQL holds its
/// connection string, password included, in `LOOPS_DATABASE_URL`; a run
/// that printed its environment stored it in the clear. A target that needs
/// one of these sets it in its own `env`, which is applied after, and whose
/// values are masked in what the run stores.
///
/// Each entry is `(name, masked)`: when `masked`, the inherited value is
/// also masked in what the run and its hook write, wherever else the run
/// found it (a file it was pointed at, a URL it printed). The others name
/// files, not secrets.
pub(crate) const DATABASE_STRIPPED: &[(&str, bool)] = &[
    ("LOOPS_DATABASE_URL", true), // loops' own (README, "PostgreSQL"): the connection string
    ("PGPASSWORD", true),         // PostgreSQL docs, libpq "Environment Variables": the password
    ("PGPASSFILE", false),        // libpq: the password file (`~/.pgpass`)
    ("PGSERVICEFILE", false),     // libpq: the service file, which may hold a password
    ("PGSSLKEY", false),          // libpq: the client certificate's secret key
];

/// Whether `name` is one of [`DATABASE_STRIPPED`].
pub(crate) fn is_database_credential(name: &str) -> bool {
    DATABASE_STRIPPED.iter().any(|(n, _)| *n == name)
}

/// The inherited values of `env` that are masked ([`DATABASE_STRIPPED`]'s
/// `masked` entries).
pub(crate) fn database_secret_values(
    env: &std::collections::BTreeMap<String, String>,
) -> impl Iterator<Item = &str> {
    DATABASE_STRIPPED
        .iter()
        .filter(|(_, masked)| *masked)
        .filter_map(|(name, _)| env.get(*name).map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_no_duplicates_and_keeps_the_spec_entries() {
        let mut sorted = ACCOUNT_STRIPPED.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ACCOUNT_STRIPPED.len());
        // SPEC §5.3 step 2.2.
        for name in [
            "CLAUDE_CONFIG_DIR",
            "CODEWITH_HOME",
            "CODEX_HOME",
            "CURSOR_CONFIG_DIR",
            "OPENCODE_CONFIG_DIR",
            "AICOPILOT_CONFIG_DIR",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "OPENROUTER_API_KEY",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
            "XDG_CACHE_HOME",
        ] {
            assert!(ACCOUNT_STRIPPED.contains(&name), "{name}");
        }
        // Issue 25 §2: the database's own, stripped whatever the account.
        for name in [
            "LOOPS_DATABASE_URL",
            "PGPASSWORD",
            "PGPASSFILE",
            "PGSERVICEFILE",
            "PGSSLKEY",
        ] {
            assert!(is_database_credential(name), "{name}");
            assert!(!ACCOUNT_STRIPPED.contains(&name), "{name} is in both lists");
        }
    }
}
