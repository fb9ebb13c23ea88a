use super::*;

fn new_key() -> NewKey {
    NewKey {
        name: "prometheus-exporter".into(),
        roles: vec!["read-only".into()],
        expires_in_seconds: 2_592_000,
        networks: Vec::new(),
        owner: None,
    }
}

#[test]
fn a_creation_sends_the_name_roles_and_lifetime_and_only_the_options_given() {
    assert_eq!(
        create_body(&new_key()).to_string(),
        r#"{"name":"prometheus-exporter","roles":["read-only"],"expires_in_seconds":2592000}"#
    );
    let for_bob = NewKey {
        roles: vec!["read-only".into(), "pool-manager".into()],
        networks: vec![
            "10.0.0.0/8".parse().unwrap(),
            "2001:db8::/32".parse().unwrap(),
        ],
        owner: Some("bob".into()),
        ..new_key()
    };
    assert_eq!(
        create_body(&for_bob).to_string(),
        r#"{"name":"prometheus-exporter","roles":["read-only","pool-manager"],"expires_in_seconds":2592000,"networks":["10.0.0.0/8","2001:db8::/32"],"owner":"bob"}"#
    );
}

#[test]
fn a_rotation_sends_a_lifetime_only_when_one_is_given() {
    assert_eq!(rotate_body(None).to_string(), "{}");
    assert_eq!(
        rotate_body(Some(43_200)).to_string(),
        r#"{"expires_in_seconds":43200}"#
    );
}

#[test]
fn the_list_is_filtered_by_an_encoded_owner() {
    assert_eq!(list_path(None), "/api/clustergate/keys");
    assert_eq!(list_path(Some("bob")), "/api/clustergate/keys?owner=bob");
    assert_eq!(
        list_path(Some("a b&owner=admin")),
        "/api/clustergate/keys?owner=a%20b%26owner%3Dadmin"
    );
}

#[test]
fn the_password_is_the_first_line_as_typed() {
    assert_eq!(
        first_line(&b" pass word \nnext\n"[..]).unwrap(),
        " pass word "
    );
    assert_eq!(first_line(&b"secret\r\n"[..]).unwrap(), "secret");
    assert_eq!(first_line(&b"no line end"[..]).unwrap(), "no line end");
    assert!(matches!(
        first_line(&b"\n"[..]),
        Err(KeysError::EmptyPassword)
    ));
    assert!(matches!(
        first_line(&b""[..]),
        Err(KeysError::EmptyPassword)
    ));
}

const CREATED: &str = r#"{"key": "cgk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "id": "0123456789abcdef", "name": "ci", "owner": "bob", "created_by": "admin",
    "roles": ["read-only"], "created_at": 1795885200, "expires_at": 1798477200, "networks": []}"#;

#[test]
fn a_new_key_alone_goes_to_standard_output() {
    let mut printed = Printed::default();
    print_created(CREATED.as_bytes(), "Created", &mut printed).unwrap();
    assert_eq!(
        printed.stdout,
        "cgk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"
    );
    assert!(printed
        .stderr
        .starts_with("Created API key 0123456789abcdef"));
    assert!(!printed.stderr.contains("AAAA"), "{}", printed.stderr);
}

#[test]
fn an_answer_without_a_well_formed_key_prints_nothing() {
    let not_a_key = CREATED.replace("cgk_0123456789abcdef_AAA", "cgk_0123456789abcdef_!!!");
    let other_id = CREATED.replace(
        "\"id\": \"0123456789abcdef\"",
        "\"id\": \"fedcba9876543210\"",
    );
    for answer in [not_a_key.as_str(), other_id.as_str(), "{}", "<html>"] {
        let mut printed = Printed::default();
        let result = print_created(answer.as_bytes(), "Created", &mut printed);
        assert!(
            matches!(result, Err(KeysError::Answer("the creation", _))),
            "{answer}"
        );
        assert_eq!(printed, Printed::default(), "{answer}");
    }
}

#[test]
fn the_login_answer_gives_the_token() {
    let answer = br#"{"token": "eyJ.a.b", "username": "admin", "permissions": {}}"#;
    assert_eq!(login_token(answer).unwrap(), "eyJ.a.b");
    assert!(matches!(
        login_token(b"{}"),
        Err(KeysError::Answer("the login", _))
    ));
}

#[test]
fn a_token_file_is_read_whole_and_a_missing_one_named() {
    let dir = std::env::temp_dir().join(format!("cg-keys-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, "eyJ.a.b\n").unwrap();
    assert_eq!(read_secret(&path, "the token file").unwrap(), "eyJ.a.b\n");
    let missing = dir.join("absent");
    let shown = read_secret(&missing, "the token file")
        .unwrap_err()
        .to_string();
    assert!(shown.starts_with("cannot read the token file "), "{shown}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unreachable_gateway_is_named_in_the_error() {
    // A port nothing listens on (bound, then closed): the command fails with the cause.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let password_file = std::env::temp_dir().join(format!("cg-keys-cli-pw-{}", std::process::id()));
    std::fs::write(&password_file, "secret\n").unwrap();
    let connection = Connection {
        gateway: args::gateway(&format!("http://127.0.0.1:{port}")).unwrap(),
        trust: Trust::System,
        credentials: Credentials::Password {
            user: "admin".into(),
            password_file: Some(password_file.clone()),
        },
    };
    let (printed, result) = run(
        connection,
        KeysCommand::List {
            owner: None,
            json: false,
        },
    );
    assert_eq!(printed, Printed::default());
    let shown = result.unwrap_err().to_string();
    assert!(shown.contains("cannot reach"), "{shown}");
    std::fs::remove_file(&password_file).unwrap();
}
