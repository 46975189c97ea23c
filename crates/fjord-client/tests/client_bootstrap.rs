//! Bootstrapping a [`FlussClient`]: when no bootstrap server answers the
//! error is the retriable `Unreachable` (the servers may come back), naming
//! what was tried; a malformed address is `Invalid` (the caller's input is
//! wrong, and retrying cannot help).

use fjord_client::{ClientError, FlussClient};
use tokio::net::TcpListener;

#[tokio::test]
async fn no_reachable_bootstrap_server_is_a_retriable_unreachable_error() {
    // A port that was just free: nothing listens on it.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    drop(listener);
    let error = match FlussClient::connect(std::slice::from_ref(&addr)).await {
        Ok(_) => panic!("nothing listens on {addr}"),
        Err(e) => e,
    };
    assert!(
        matches!(error, ClientError::Unreachable { tried: 1, .. }),
        "{error:?}"
    );
    assert!(error.is_retriable(), "{error}");
    assert!(error.to_string().contains(&addr), "{error}");
}

#[tokio::test]
async fn a_bootstrap_address_without_a_port_is_refused_as_invalid_not_retried() {
    let error = match FlussClient::connect(&["localhost".to_owned()]).await {
        Ok(_) => panic!("`localhost` has no port"),
        Err(e) => e,
    };
    assert!(matches!(error, ClientError::Invalid(_)), "{error:?}");
    assert!(!error.is_retriable(), "{error}");
    assert!(error.to_string().contains("`localhost`"), "{error}");
}
