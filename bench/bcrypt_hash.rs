//! A bcrypt hash of the password on standard input, at the cost given (default 12, what
//! `ceph dashboard ac-user-create` gives): the users file `clustergate users import` would
//! write, for `bench/refusal_timing.py`.

use std::io::Read;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cost = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 12,
    };
    let mut password = String::new();
    std::io::stdin().read_to_string(&mut password)?;
    println!("{}", bcrypt::hash(password.trim_end_matches('\n'), cost)?);
    Ok(())
}
