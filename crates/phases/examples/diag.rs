use phases::sequential::StopRule;
use phases::simulate::{self, Noise, Scenario};
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let level: f64 = a[0].parse().unwrap();
    let min: usize = a[1].parse().unwrap();
    let g: f64 = a[2].parse().unwrap();
    let secs: f64 = a[3].parse().unwrap();
    let n: u64 = a[4].parse().unwrap();
    let which = &a[5];
    let effect: f64 = a[6].parse().unwrap();
    let start: u64 = a.get(7).map_or(0, |s| s.parse().unwrap());
    let rule = StopRule {
        level,
        min_rounds: min,
        look_growth: g,
        max_seconds: secs,
        ..StopRule::default()
    };
    let noise = if which == "heavy" {
        Noise::heavy()
    } else {
        Noise::realistic()
    };
    let s = Scenario::new(noise, effect, rule);
    println!(
        "{level} {min} {g} {secs}s {which} {effect}: {}",
        simulate::tally(&s, start..start + n)
    );
}
