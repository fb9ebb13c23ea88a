//! The `clustergate` command: run the gateway, check a configuration, hash a password.

#![deny(unsafe_code)]

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use clustergate::accounts::{self, AccountsCommand, AccountsError};
use clustergate::config::ProviderUrl;
use clustergate::import::{self, CephCli, Destination, ImportError};
use clustergate::keys_cli::{self, args as key_args, Connection, Credentials, KeysCommand, Trust};
use clustergate::{config, logs, server, users::PasswordHash};

/// mimalloc instead of glibc's malloc: the request path allocates many small, short-lived
/// objects (measured: glibc's malloc and free were 17% of the gateway's CPU at saturation),
/// and glibc kept argon2's 19 MiB blocks resident after logins unless tuned.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code for a configuration (or input) that does not validate: sysexits' EX_USAGE.
const EXIT_BAD_CONFIG: u8 = 64;
/// `users import` could not read the dashboard's accounts: sysexits' EX_UNAVAILABLE.
const EXIT_UNAVAILABLE: u8 = 69;
/// `users import` refuses to replace a file without --force: sysexits' EX_CANTCREAT.
const EXIT_CANT_CREATE: u8 = 73;
/// `users import` could not write a file: sysexits' EX_IOERR.
const EXIT_IO: u8 = 74;

#[derive(Parser)]
#[command(
    name = "clustergate",
    version,
    about = "An authenticating gateway in front of Ceph manager dashboards",
    long_about = "An authenticating gateway in front of Ceph manager dashboards: it serves the \
dashboard's login itself, checks each request's token and the user's role for the \
operation, and forwards it to the active manager as an account holding the user's roles.",
    after_help = "The book: docs/ (mdbook build docs). This command line: docs/command-line.md; \
starting: docs/quick-start.md; settings: docs/configuration/README.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the gateway.
    ///
    /// SIGHUP reloads the configuration; SIGTERM drains (server.drain_seconds), then stops.
    #[command(after_help = "The book: docs/quick-start.md, docs/reloading-and-upgrading.md")]
    Run {
        #[arg(long, default_value = "conf/clustergate.toml")]
        config: PathBuf,
        /// Take the listening sockets over from the running gateway (graceful upgrade): start
        /// this, then send the old process SIGQUIT within 5 seconds.
        #[arg(long)]
        upgrade: bool,
    },
    /// Validate a configuration (and its users and roles files), print each problem, exit non-zero if any.
    ///
    /// Each problem is printed as `file: key: message`, with the fix; exit 64 when there is one.
    #[command(after_help = "The book: docs/configuration/README.md")]
    CheckConfig {
        #[arg(long, default_value = "conf/clustergate.toml")]
        config: PathBuf,
    },
    /// Read one password from standard input and print its argon2id hash for the users file.
    #[command(after_help = "The book: docs/configuration/users-and-roles.md")]
    HashPassword,
    /// With `auth.source = "dashboard"` and Redis state: forget the gateways' count of
    /// USERNAME's failed logins, after resetting the dashboard's own
    /// (`ceph dashboard ac-user-enable USERNAME`, or a new password). Until then the
    /// gateways send only the password that last succeeded through them.
    #[command(after_help = "The book: docs/accounts.md")]
    Unlock {
        #[arg(long, default_value = "conf/clustergate.toml")]
        config: PathBuf,
        username: String,
    },
    /// Manage the users file.
    #[command(after_help = "The book: docs/accounts.md")]
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// The dashboard accounts the gateway manages (`upstream.identity = "roles"`): one per
    /// distinct set of users' roles, named `cg-` and 16 hex digits.
    #[command(after_help = "The book: docs/what-the-dashboard-sees.md")]
    Accounts {
        #[command(subcommand)]
        command: AccountsSubcommand,
    },
    /// API keys for scripts, exporters and CI jobs, through a running gateway's HTTP API.
    /// Exits 1 with the gateway's status and detail when it refuses.
    #[command(after_help = "The book: docs/api-keys.md")]
    Keys {
        #[command(subcommand)]
        command: KeysSubcommand,
    },
}

#[derive(Subcommand)]
enum KeysSubcommand {
    /// Create a key: prints only the key on standard output (shown this once), what it is
    /// on standard error.
    Create {
        #[command(flatten)]
        gateway: GatewayArgs,
        /// What the key is for: 1 to 64 of A-Z a-z 0-9 . _ -
        #[arg(long, value_parser = key_args::key_name)]
        name: String,
        /// The roles it acts with (at most yours), comma-separated.
        #[arg(long, required = true, value_delimiter = ',', value_parser = key_args::role)]
        roles: Vec<String>,
        /// Its lifetime: 30d, 12h, 90m or 45s (at most the gateway's api_keys.max_lifetime_days).
        #[arg(long, value_parser = key_args::lifetime)]
        expires_in: u64,
        /// A client address range it is accepted from (CIDR, or one address; repeat for
        /// more). Default: any.
        #[arg(long = "network", value_parser = key_args::network)]
        networks: Vec<ipnet::IpNet>,
        /// Create it for this user (administrators only).
        #[arg(long)]
        owner: Option<String>,
    },
    /// List keys (yours; an administrator's: everyone's) as a table, never a secret.
    List {
        #[command(flatten)]
        gateway: GatewayArgs,
        /// Only this user's keys (administrators).
        #[arg(long)]
        owner: Option<String>,
        /// The gateway's JSON answer instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key: refused at once by this gateway, by the others within the revocation
    /// feed's bound.
    Revoke {
        #[command(flatten)]
        gateway: GatewayArgs,
        /// The key's id (the ID column of `keys list`).
        #[arg(value_parser = key_args::key_id)]
        id: String,
    },
    /// Replace a key by a new one (same name, owner, roles, networks) and revoke it; prints
    /// the new key as `create` does.
    Rotate {
        #[command(flatten)]
        gateway: GatewayArgs,
        #[arg(value_parser = key_args::key_id)]
        id: String,
        /// The new key's lifetime (default: the old key's): 30d, 12h, 90m or 45s.
        #[arg(long, value_parser = key_args::lifetime)]
        expires_in: Option<u64>,
    },
}

/// Where the gateway is, how its certificate is verified, and who asks.
#[derive(Args)]
struct GatewayArgs {
    /// The gateway's address: https://host:port (http:// only to a loopback address).
    #[arg(long, default_value = "https://127.0.0.1:8443", value_parser = key_args::gateway)]
    gateway: ProviderUrl,
    /// Verify the gateway's certificate against this PEM file (its certificate or its CA;
    /// a generated one's CA is state_dir/tls/ca.pem). Default: the system's roots.
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Do not verify the gateway's certificate at all.
    #[arg(long, conflicts_with = "ca_file")]
    insecure: bool,
    #[command(flatten)]
    login: LoginArgs,
    /// The user's password: the first line of this file (default: one line of standard input).
    #[arg(long, requires = "user", conflicts_with = "token_file")]
    password_file: Option<PathBuf>,
}

/// Who the command acts as: a gateway token, or a user who logs in for it.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct LoginArgs {
    /// A file holding a gateway token (from POST /api/auth).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Log in as this user (and out at the end); the password is never an argument.
    #[arg(long)]
    user: Option<String>,
}

#[derive(Subcommand)]
enum AccountsSubcommand {
    /// List this deployment's accounts on the active manager (roles, state, last use) and
    /// its mirrored roles.
    List {
        #[arg(long, default_value = "conf/clustergate.toml")]
        config: PathBuf,
    },
    /// Remove this deployment's accounts unused for a while, and the mirrored roles no
    /// account holds any more. An account removed while still in use is made again on its
    /// next request; accounts this deployment's key does not name are never touched.
    Prune {
        #[arg(long, default_value = "conf/clustergate.toml")]
        config: PathBuf,
        /// Remove the accounts with no use recorded in this many days.
        #[arg(long, default_value_t = 30)]
        unused_for_days: u64,
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Write the dashboard's users and custom roles as a users file and a roles file.
    ///
    /// Reads them with the `ceph` CLI (`ceph dashboard ac-user-show`, `ac-role-show`), which
    /// needs a client key allowed to run mgr commands. Kept: each user's bcrypt hash (so it
    /// logs in with its dashboard password), its roles (system roles under the same names,
    /// custom roles in the roles file), disabled users disabled. Users the dashboard holds
    /// back (an expired password, or a password change required) are written disabled;
    /// scopes or permissions the gateway does not know are left out of a role. Each such
    /// difference is printed; hashes never are. Existing files are kept unless --force
    /// (exit 73). The dashboard's REST API is not a source: it does not return password
    /// hashes, so its users could not log in with `auth.source = "local"`.
    Import {
        /// The users file to write (the config's auth.users_file).
        #[arg(long)]
        users_file: PathBuf,
        /// The roles file to write (the config's auth.roles_file).
        #[arg(long)]
        roles_file: PathBuf,
        /// Replace the files if they exist.
        #[arg(long)]
        force: bool,
        /// The cluster's ceph.conf, passed to `ceph -c` (default: ceph's own).
        #[arg(long)]
        ceph_conf: Option<PathBuf>,
        /// The `ceph` program.
        #[arg(long, default_value = "ceph")]
        ceph: PathBuf,
    },
}

fn main() -> ExitCode {
    // First, before any secret is read (a configuration, a password on stdin).
    if let Err(e) = clustergate::secrets::forbid_core_dumps() {
        eprintln!("clustergate: cannot make the process non-dumpable: {e}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Run { config, upgrade } => run(&config, server::Start { upgrade }),
        Command::CheckConfig { config } => check_config(&config),
        Command::HashPassword => hash_password(),
        Command::Unlock { config, username } => unlock(&config, &username),
        Command::Accounts { command } => accounts(command),
        Command::Keys { command } => keys(command),
        Command::Users {
            command:
                UsersCommand::Import {
                    users_file,
                    roles_file,
                    force,
                    ceph_conf,
                    ceph,
                },
        } => import_users(
            &CephCli {
                program: ceph,
                conf: ceph_conf,
            },
            &Destination {
                users_file,
                roles_file,
                force,
            },
        ),
    }
}

fn load(path: &std::path::Path) -> Result<config::Config, ExitCode> {
    config::load(path).map_err(|errors| {
        eprintln!("{errors}");
        ExitCode::from(EXIT_BAD_CONFIG)
    })
}

fn run(path: &std::path::Path, start: server::Start) -> ExitCode {
    let config = match load(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    // Kept until the end of `run`: dropping it writes out the lines still queued.
    let logging = match logs::init(&config.log) {
        Ok(logging) => logging,
        Err(e) => {
            eprintln!("clustergate: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(config = %path.display(), version = env!("CARGO_PKG_VERSION"), upgrade = start.upgrade, "starting clustergate");
    match server::run(config, start, logging.handles()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            eprintln!("clustergate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn accounts(command: AccountsSubcommand) -> ExitCode {
    let (path, command) = match command {
        AccountsSubcommand::List { config } => (config, AccountsCommand::List),
        AccountsSubcommand::Prune {
            config,
            unused_for_days,
            dry_run,
        } => (
            config,
            AccountsCommand::Prune {
                unused_for_days,
                dry_run,
            },
        ),
    };
    let config = match load(&path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    match accounts::run(config, command) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(AccountsError::NotManaged) => {
            eprintln!("{}: {}", path.display(), AccountsError::NotManaged);
            ExitCode::from(EXIT_BAD_CONFIG)
        }
        Err(e) => {
            eprintln!("clustergate accounts: {e}");
            ExitCode::from(EXIT_UNAVAILABLE)
        }
    }
}

fn keys(command: KeysSubcommand) -> ExitCode {
    let (gateway, command) = match command {
        KeysSubcommand::Create {
            gateway,
            name,
            roles,
            expires_in,
            networks,
            owner,
        } => (
            gateway,
            KeysCommand::Create(keys_cli::NewKey {
                name,
                roles,
                expires_in_seconds: expires_in,
                networks,
                owner,
            }),
        ),
        KeysSubcommand::List {
            gateway,
            owner,
            json,
        } => (gateway, KeysCommand::List { owner, json }),
        KeysSubcommand::Revoke { gateway, id } => (gateway, KeysCommand::Revoke { id }),
        KeysSubcommand::Rotate {
            gateway,
            id,
            expires_in,
        } => (
            gateway,
            KeysCommand::Rotate {
                id,
                expires_in_seconds: expires_in,
            },
        ),
    };
    let (printed, result) = keys_cli::run(gateway.connection(), command);
    eprint!("{}", printed.stderr);
    print!("{}", printed.stdout);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("clustergate keys: {e}");
            ExitCode::FAILURE
        }
    }
}

impl GatewayArgs {
    fn connection(self) -> Connection {
        let trust = match (self.ca_file, self.insecure) {
            (_, true) => Trust::Insecure,
            (Some(path), false) => Trust::CaFile(path),
            (None, false) => Trust::System,
        };
        let credentials = match (self.login.token_file, self.login.user) {
            (Some(path), _) => Credentials::TokenFile(path),
            // (clap's group: one of the two is given)
            (None, user) => Credentials::Password {
                user: user.unwrap_or_default(),
                password_file: self.password_file,
            },
        };
        Connection {
            gateway: self.gateway,
            trust,
            credentials,
        }
    }
}

fn unlock(path: &std::path::Path, username: &str) -> ExitCode {
    let config = match load(path) {
        Ok(config) => config,
        Err(code) => return code,
    };
    if !config.state.is_shared() {
        eprintln!("{}: state.backend = \"memory\": the counts live in the running gateway; restart it to forget them", path.display());
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    let forgotten = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|runtime| {
            runtime.block_on(async {
                let stores = config
                    .state
                    .build(&config.server.state_dir, config.api_keys.max_keys)
                    .map_err(|e| e.to_string())?;
                let attempts = stores.dashboard_attempts;
                attempts.forget(username).await.map_err(|e| e.to_string())
            })
        });
    match forgotten {
        Ok(()) => {
            println!("{username:?}: failed logins forgotten");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("clustergate unlock: {e}");
            ExitCode::from(EXIT_UNAVAILABLE)
        }
    }
}

fn check_config(path: &std::path::Path) -> ExitCode {
    match load(path) {
        Ok(config) => {
            if config.auth.source == config::AuthSource::Dashboard {
                println!(
                    "{}: ok (logins checked by the dashboard; no users or roles file is read)",
                    path.display()
                );
                return ExitCode::SUCCESS;
            }
            let users = &config.users;
            let roles = match &users.roles.file {
                Some(file) => format!(
                    ", {} custom roles in {}",
                    users.roles.roles.len(),
                    file.display()
                ),
                None => String::new(),
            };
            println!(
                "{}: ok ({} users in {}{roles})",
                path.display(),
                users.users.len(),
                users.file.display()
            );
            if !config.users.users.iter().any(|u| u.enabled) {
                println!("note: no enabled user; the first start creates 'admin' with a password in state_dir/initial-admin-password");
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

fn hash_password() -> ExitCode {
    let mut line = String::new();
    if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
        eprintln!("clustergate: cannot read the password: {e}");
        return ExitCode::FAILURE;
    }
    let password = line.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        eprintln!("clustergate: the password is empty");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    match PasswordHash::hash_new(password) {
        Ok(PasswordHash::Argon2(phc) | PasswordHash::Bcrypt(phc)) => {
            println!("{phc}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("clustergate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn import_users(ceph: &CephCli, to: &Destination) -> ExitCode {
    match import::import(ceph, to, unix_now()) {
        Ok(imported) => {
            for note in &imported.notes {
                eprintln!("note: {note}");
            }
            println!(
                "wrote {} users ({} disabled) to {} and {} custom roles to {}",
                imported.users,
                imported.disabled,
                to.users_file.display(),
                imported.roles,
                to.roles_file.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("clustergate: {e}");
            ExitCode::from(match e {
                ImportError::Exists(_) => EXIT_CANT_CREATE,
                ImportError::Ceph(_) | ImportError::TooMany(_) => EXIT_UNAVAILABLE,
                ImportError::Export(_) | ImportError::Write(_) => EXIT_IO,
            })
        }
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `command` and every subcommand under it, with their paths (`keys create`).
    fn all(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands() {
            let path = format!("{path} {}", sub.get_name()).trim().to_string();
            all(sub, path.clone(), out);
            out.push((path, sub.clone()));
        }
    }

    /// The `docs/....md` pages a help text names.
    fn pages(help: &str) -> Vec<String> {
        help.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '(' || c == ')')
            .filter(|w| w.starts_with("docs/") && w.ends_with(".md"))
            .map(str::to_string)
            .collect()
    }

    /// The ```text block under the heading that names `clustergate {path}` (`--help` for
    /// the gateway's own) in docs/command-line.md.
    fn help_on_the_page(page: &str, path: &str) -> Option<String> {
        let heading = match path {
            "" => "`clustergate --help`".to_string(),
            path => format!("`clustergate {path}`"),
        };
        let mut lines = page
            .lines()
            .skip_while(|l| !(l.starts_with('#') && l.ends_with(&heading)));
        lines.next()?;
        let block: Vec<&str> = lines
            .skip_while(|l| *l != "```text")
            .skip(1)
            .take_while(|l| *l != "```")
            .collect();
        Some(block.join("\n"))
    }

    #[test]
    fn the_command_line_page_shows_each_command_s_help_as_the_binary_prints_it() {
        let mut root = Cli::command();
        root.build();
        let mut commands = vec![(String::new(), root.clone())];
        all(&root, String::new(), &mut commands);
        let page_path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/command-line.md");
        let page = std::fs::read_to_string(page_path).unwrap();
        for (path, command) in commands {
            // clap's own `help` subcommands, and the groups (their commands have sections)
            let clap_help = path.split_whitespace().any(|word| word == "help");
            if clap_help || command.has_subcommands() && !path.is_empty() {
                continue;
            }
            // What `clustergate PATH --help` prints: clap's own answer to the flag.
            let argv = std::iter::once("clustergate")
                .chain(path.split_whitespace())
                .chain(["--help"]);
            let help = match Cli::try_parse_from(argv) {
                Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.to_string(),
                _ => panic!("`clustergate {path} --help` printed no help"),
            };
            let shown = help_on_the_page(&page, &path).unwrap_or_else(|| {
                panic!("docs/command-line.md has no section for `clustergate {path}`")
            });
            assert_eq!(
                shown.trim_end(),
                help.trim_end(),
                "docs/command-line.md: the help of `clustergate {path}` is not the binary's: paste `clustergate {path} --help`"
            );
        }
    }

    #[test]
    fn every_command_s_help_names_its_page_of_the_book_and_the_page_exists() {
        let mut commands = vec![("clustergate".to_string(), Cli::command())];
        all(&Cli::command(), String::new(), &mut commands);
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for (path, mut command) in commands {
            let help = command.render_long_help().to_string();
            // A subcommand of a group may lean on its group's page (`keys create`).
            let named = pages(&help);
            if path.contains(' ') && named.is_empty() {
                continue;
            }
            assert!(
                !named.is_empty(),
                "`{path} --help` names no page of the book (docs/...)"
            );
            for page in named {
                assert!(
                    root.join(&page).is_file(),
                    "`{path} --help` names {page}, which does not exist"
                );
            }
        }
    }
}
