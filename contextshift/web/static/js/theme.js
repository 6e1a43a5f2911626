// The colour theme (light, dark, or the system's), remembered in localStorage. Loaded as a classic script in
// <head> so the remembered theme is on <html> before the first paint (the CSP allows no inline script).

(() => {
  const KEY = "contextshift.theme";
  const CHOICES = ["system", "light", "dark"];
  let saved = "system";
  try {
    saved = localStorage.getItem(KEY) || "system";
  } catch {
    /* storage blocked (a private window's setting): the system theme applies */
  }
  const apply = (choice) => {
    const theme = CHOICES.includes(choice) ? choice : "system";
    if (theme === "system") document.documentElement.removeAttribute("data-theme");
    else document.documentElement.setAttribute("data-theme", theme);
    return theme;
  };
  saved = apply(saved);
  // The header's switch (app.js) reads and sets the choice through this one object.
  globalThis.contextshiftTheme = {
    choices: CHOICES,
    get: () => saved,
    set(choice) {
      saved = apply(choice);
      try {
        if (saved === "system") localStorage.removeItem(KEY);
        else localStorage.setItem(KEY, saved);
      } catch {
        /* not remembered, but applied for this page */
      }
      return saved;
    },
  };
})();
