//! Who may use the SQL endpoints: users and passwords from the server
//! config (`sql.users`), checked by SCRAM on Postgres and basic auth on
//! Flight SQL; with none configured, any user without a password — only
//! on a loopback address ([`check_auth`]).

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::error::SqlError;

/// The option naming the users: `user:password[,user:password...]`.
pub const OPT_USERS: &str = "sql.users";

/// Who may connect to an endpoint.
#[derive(Clone, Debug, Default)]
pub struct Users {
    /// User → password; empty: anyone, without a password (loopback only).
    pub passwords: HashMap<String, String>,
}

impl Users {
    /// Parses [`OPT_USERS`]: `user:password` pairs separated by commas
    /// (a password may hold `:` but not `,`).
    pub fn parse(text: &str) -> Result<Self, SqlError> {
        let mut passwords = HashMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry.split_once(':') {
                Some((user, password)) if !user.trim().is_empty() && !password.is_empty() => {
                    passwords.insert(user.trim().to_owned(), password.to_owned());
                }
                _ => {
                    return Err(SqlError::Invalid(format!(
                        "{OPT_USERS}: entry {:?} is not user:password",
                        entry.split(':').next().unwrap_or_default()
                    )))
                }
            }
        }
        Ok(Self { passwords })
    }

    /// Whether `user` with `password` may connect.
    pub fn allows(&self, user: &str, password: &str) -> bool {
        if self.passwords.is_empty() {
            return true;
        }
        // Compared in full whatever the first difference, so the time
        // taken does not tell how much of a guess was right.
        self.passwords.get(user).is_some_and(|expected| {
            expected.len() == password.len()
                && expected
                    .bytes()
                    .zip(password.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        })
    }
}

/// Refuses to serve without users on an address other clients can reach.
pub fn check_auth(endpoint: &str, addr: &SocketAddr, users: &Users) -> Result<(), SqlError> {
    if users.passwords.is_empty() && !addr.ip().is_loopback() {
        return Err(SqlError::Invalid(format!(
            "{endpoint} on {addr}: no users are configured ({OPT_USERS}), and without them only a loopback address may be served"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_parse_and_check_passwords() {
        let users = Users::parse("alice:s3cret, bob:a:b").unwrap();
        assert!(users.allows("alice", "s3cret"));
        assert!(users.allows("bob", "a:b"));
        assert!(!users.allows("alice", "s3cre"));
        assert!(!users.allows("carol", "s3cret"));
        assert!(Users::parse("").unwrap().allows("anyone", ""));
        let e = Users::parse("alice").unwrap_err().to_string();
        assert!(e.contains(OPT_USERS), "{e}");
        // The error does not echo a password.
        let e = Users::parse("alice:").unwrap_err().to_string();
        assert!(!e.contains(':') || e.contains("alice"), "{e}");
    }
}
