//! The golden cases of SPEC.md section 18.4, testdata/golden/retry.json: one test per case, named by
//! the case id (every case Rust claims in capabilities.json; the others are listed, not run). The
//! wait before a retry, or giving up, from the failed answer's status and `Retry-After`, the retry
//! number, the policy and the random draw (injected with `RetryPolicy::with_random`), through
//! `RetryPolicy::wait`, the function the clients' retry loop calls; waits compared bit for bit.

use densewire::{MAX_RETRY_AFTER, RetryPolicy, parse_retry_after};
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;

mod common;
use common::capabilities::claimed_cases;
use common::{R, load, s};

fn f64_bits(c: &Value, field: &str) -> f64 {
    f64::from_bits(u64::from_str_radix(s(c, field), 16).unwrap_or_else(|e| panic!("{field}: {e}")))
}

fn run_case(c: &Value) -> R {
    let draw = f64_bits(c, "draw_bits");
    if s(c, "draw").parse::<f64>().ok() != Some(draw) {
        return Err(format!("draw {} is not draw_bits {draw:?}", s(c, "draw")).into());
    }
    let policy =
        RetryPolicy::new(c["max_retries"].as_u64().unwrap() as u32, f64_bits(c, "base_bits"), f64_bits(c, "cap_bits"))
            .map_err(|e| format!("policy: {e}"))?
            .with_random(move || draw);
    let retry_after = c.get("retry_after").and_then(Value::as_str);
    let now = c["now"].as_f64().unwrap();
    let wait = policy.wait(c["retry"].as_u64().unwrap() as u32, c["status"].as_u64().unwrap() as u16, retry_after, now);
    if c.get("wait").is_some() {
        let Some(w) = wait else { return Err(format!("gave up; the spec waits {} s", s(c, "wait")).into()) };
        if format!("{:016x}", w.to_bits()) != s(c, "wait_bits") {
            return Err(format!("waits {w:?} s; the spec {} ({})", s(c, "wait"), s(c, "wait_bits")).into());
        }
        return Ok(());
    }
    if let Some(w) = wait {
        return Err(format!("waits {w:?} s; the spec gives up ({})", s(c, "give_up")).into());
    }
    if s(c, "give_up") == "retry_after_too_long" {
        // the value the 429/503 error carries
        let seconds = parse_retry_after(retry_after.unwrap(), now);
        let want: f64 = s(c, "retry_after_seconds").parse().unwrap();
        if !(seconds.is_some_and(|x| x > MAX_RETRY_AFTER) && seconds == Some(want)) {
            return Err(format!("Retry-After read as {seconds:?}, the spec {want:?}").into());
        }
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let cases = load("retry");
    assert!(!cases.is_empty(), "retry.json has no cases");
    let claimed = claimed_cases(&[("retry.json", cases.as_slice())], !args.list);
    let trials = cases
        .into_iter()
        .filter(|c| claimed.contains(s(c, "id")))
        .map(|c| Trial::test(s(&c, "id").to_string(), move || run_case(&c)))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
