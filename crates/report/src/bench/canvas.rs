//! What the bench's SVG pictures share: the page's width and margins, the
//! colour of each variant, text escaped for SVG, and the cross that marks
//! a failure. [`super::svg`] (the phases' strip plots) and [`super::serve`]
//! (the serve and memory panels below them) both draw on it; it draws
//! nothing itself.

use timeline::Variant;

/// The picture's width, in SVG user units.
pub(super) const WIDTH: f64 = 960.0;
/// The left margin, where the panels' labels go.
pub(super) const LEFT: f64 = 150.0;
/// The right margin.
pub(super) const RIGHT: f64 = 40.0;
/// The width of a plot, between the margins.
pub(super) const PLOT_W: f64 = WIDTH - LEFT - RIGHT;

/// The colour of a variant: A blue, B orange.
pub(super) fn colour(v: Variant) -> &'static str {
    match v {
        Variant::A => "#1f77b4",
        Variant::B => "#ff7f0e",
    }
}

/// `s` escaped for SVG text and attribute values.
pub(super) fn esc(s: &str) -> String {
    crate::printable(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The path data of a 6-unit cross centred at (`cx`, `cy`), the mark of
/// a failed trial or request.
pub(super) fn cross(cx: f64, cy: f64) -> String {
    format!("M{:.1} {:.1}l6 6m0 -6l-6 6", cx - 3.0, cy - 3.0)
}
