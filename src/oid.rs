//! Object ids written as hex, read back in the object format their length says (64 digits:
//! SHA-256, else SHA-1): the ids kern writes down (the journal, refs snapshots) come from
//! either kind of repository. A leaf, so the state folder can read its own records without
//! reaching into the repository.

/// `hex` as an object id of the format its length says.
pub(crate) fn parse(hex: &str) -> std::result::Result<git2::Oid, git2::Error> {
    let format = if hex.len() == 64 {
        git2::ObjectFormat::Sha256
    } else {
        git2::ObjectFormat::Sha1
    };
    git2::Oid::from_str_ext(hex, format)
}
