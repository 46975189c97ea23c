//! Review finding: a bootstrap address that can never work (no port) is
//! reported as the retriable `Unreachable`, so a caller retrying retriable
//! errors retries a configuration mistake for ever.

use fjord_client::FlussClient;

#[tokio::test]
#[ignore = "bug: a malformed bootstrap address (no port) is the retriable Unreachable, not Invalid"]
async fn a_bootstrap_address_without_a_port_is_not_retriable() {
    let bootstrap = ["localhost".to_owned()];
    let error = match FlussClient::connect(&bootstrap).await {
        Ok(_) => panic!("`localhost` has no port"),
        Err(e) => e,
    };
    assert!(!error.is_retriable(), "retriable: {error:?}");
}
