//! Operating characteristics of the A/B stopping rule on synthetic runs:
//! for each noise model and true effect, how many of N whole runs end
//! faster, slower, equivalent or inconclusive, why they stopped, and how
//! many rounds and (simulated) seconds they took.
//!
//! `cargo run -p phases --example ab_sim [-- RUNS [LEVEL MIN_ROUNDS GROWTH MAX_ROUNDS MAX_SECONDS]]`
//! (defaults: 200 runs, the default rule).

use phases::sequential::StopRule;
use phases::simulate::{self, Noise, Scenario};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: u64 = args
        .first()
        .map_or(200, |s| s.parse().expect("RUNS is a count"));
    let mut rule = StopRule::default();
    let num = |i: usize| args.get(i).map(|s| s.parse::<f64>().expect("a number"));
    if let Some(v) = num(1) {
        rule.level = v;
    }
    if let Some(v) = num(2) {
        rule.min_rounds = v as usize;
    }
    if let Some(v) = num(3) {
        rule.look_growth = v;
    }
    if let Some(v) = num(4) {
        rule.max_rounds = v as usize;
    }
    if let Some(v) = num(5) {
        rule.max_seconds = v;
    }
    println!(
        "rule: level {}, first look after {} rounds, looks every {:.0}% more, at most {} rounds / {} s, noise band +-{:.0}%",
        rule.level,
        rule.min_rounds,
        rule.look_growth * 100.0,
        rule.max_rounds,
        rule.max_seconds,
        rule.threshold * 100.0
    );
    for (name, noise) in [("realistic", Noise::realistic()), ("heavy", Noise::heavy())] {
        for effect in [0.0, 0.10, -0.10, 0.05] {
            let s = Scenario::new(noise, effect, rule.clone());
            let t = simulate::tally(&s, 0..runs);
            println!("{name:>9} {:+4.0}%: {t}", effect * 100.0);
        }
    }
    // `coldstart diff`'s rule on a loaded machine: CPU time as the basis,
    // a 5% band; then the same runs decided on wall time.
    let cpu = StopRule::cpu_basis(0.05);
    let wall = StopRule {
        measures: vec![phases::Measure::READY],
        ..cpu.clone()
    };
    for (name, rule) in [("loaded, cpu", cpu), ("loaded, wall", wall)] {
        for effect in [0.0, 0.10, -0.10] {
            let s = Scenario::new(Noise::loaded(), effect, rule.clone());
            let t = simulate::tally(&s, 0..runs);
            println!("{name:>12} {:+4.0}%: {t}", effect * 100.0);
        }
    }
}
