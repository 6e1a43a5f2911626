// Lorebooks (P3): the list (#/lorebooks) and the editor of one lorebook and its entries (#/lorebook/{id}):
// rename, delete, add/edit/remove entries with every field the API has.
//
// PATCH /lorebooks/{id} with `entries` replaces the whole list, and the API takes no entry ids: every save
// gives all of the lorebook's entries new ids. The editor therefore works by position (entry 1, 2, …), always
// sends every entry as the server last returned it, with only the one being edited changed, and reads the new
// ids back from the answer.

import { ApiError, del, get, patch, post } from "./api.js";
import { badge, checkbox, field, h, num, replace, select, shorten, toast } from "./dom.js";
import { errorSlots, problemsOf } from "./fielderrors.js";

const POSITIONS = [
  ["before", "Before the history"],
  ["after", "After the history"],
  ["depth", "Inside the history"],
];
const POSITION_SHORT = { before: "before the history", after: "after the history", depth: "in the history" };
const ENTRY_FIELDS = ["keys", "secondary_keys", "content", "constant", "enabled", "order", "position", "depth"];

/** An entry as the API takes it (LoreEntryIn), from an entry as it answers (LoreEntryOut). */
function entryIn(entry) {
  const out = {};
  for (const key of ENTRY_FIELDS) out[key] = entry[key];
  return out;
}

const splitKeys = (text) =>
  text
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);
const numberOrNull = (text) => (String(text).trim() === "" ? null : Number(text));

function usedBy(store, book) {
  return store.bots.filter((b) => (b.lorebook_ids || []).includes(book.id));
}

// -- the list ----------------------------------------------------------------------------------------------

export async function lorebooksView(main, _params, { store, go }) {
  const [{ lorebooks }] = await Promise.all([get("/lorebooks"), store.refresh()]);
  const name = h("input", { type: "text", name: "name", maxlength: 200, autocomplete: "off", placeholder: "e.g. The world of Valyria" });
  const createButton = h("button.primary", { type: "submit" }, "Create lorebook");
  const form = h(
    "form.lorebook-create.card",
    {
      "aria-label": "New lorebook",
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        slots.clear();
        const body = { name: name.value };
        createButton.disabled = true;
        try {
          const { lorebook } = await post("/lorebooks", body);
          go(`#/lorebook/${lorebook.id}`);
        } catch (error) {
          if (slots.apply(problemsOf(error, body), (loc) => loc[0] || null).length || error.code !== "VALIDATION") toast(error.message, "error");
        } finally {
          createButton.disabled = false;
        }
      },
    },
    h("h2", "New lorebook"),
    field("Lorebook name", name).row,
    h("div.actions", createButton),
  );
  const slots = errorSlots({ name });
  replace(
    main,
    h(
      "section.page.lorebooks-page",
      h("div.page-head", h("h1", "Lorebooks"), h("a.button", { href: "#/bots" }, "Bots")),
      h(
        "p.lead",
        "A lorebook holds entries of background knowledge. An entry goes into the prompt when one of its keys appears in the input or the recent messages, or always when it is constant. Pick lorebooks for a bot in its settings.",
      ),
      lorebooks.length
        ? h(
            "ul.card-list.lorebook-list",
            { "aria-label": "Lorebooks" },
            lorebooks.map((book) => {
              const bots = usedBy(store, book);
              return h(
                "li.card",
                { dataset: { lorebookId: book.id } },
                h("a.card-title", { href: `#/lorebook/${book.id}` }, book.name),
                h("p.muted", `${book.entries.length} entr${book.entries.length === 1 ? "y" : "ies"}`),
                h("p.muted", bots.length ? ["Used by ", bots.map((b, i) => [i ? ", " : "", h("a", { href: `#/bot/${b.id}` }, b.name)])] : "Not used by a bot yet."),
              );
            }),
          )
        : h("p.muted", "No lorebooks yet."),
      form,
    ),
  );
}

// -- the editor ----------------------------------------------------------------------------------------------

export async function lorebookView(main, [lorebookId], { store, go }) {
  const [{ lorebook }] = await Promise.all([get(`/lorebooks/${encodeURIComponent(lorebookId)}`), store.loaded ? null : store.refresh()]);
  const st = { book: lorebook, editing: null, focus: null, dirty: false };
  /** Another entry's form may replace the open one: only after asking, when it holds changes. */
  const mayLeave = () => {
    if (st.editing === null || !st.dirty) return true;
    const what = st.editing === "new" ? "the new entry" : `entry ${st.editing + 1}`;
    return window.confirm(`Discard your changes to ${what}?`);
  };
  document.title = `${lorebook.name} · contextshift`;

  const heading = h("h1.lorebook-heading", lorebook.name);
  const status = h("p.visually-hidden", { role: "status" });
  const say = (words) => {
    status.textContent = words;
    toast(words);
  };

  // name
  const name = h("input", { type: "text", name: "name", maxlength: 200, value: lorebook.name, autocomplete: "off" });
  const renameButton = h("button.small", { type: "submit" }, "Rename");
  const nameForm = h(
    "form.lorebook-name",
    {
      "aria-label": "Lorebook name",
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        nameErrors.clear();
        if (name.value === st.book.name) return toast("Nothing changed.");
        const body = { name: name.value };
        renameButton.disabled = true;
        try {
          st.book = (await patch(`/lorebooks/${st.book.id}`, body)).lorebook;
          heading.textContent = st.book.name;
          document.title = `${st.book.name} · contextshift`;
          name.value = st.book.name;
          say("Lorebook renamed.");
          name.focus();
        } catch (error) {
          if (nameErrors.apply(problemsOf(error, body), (loc) => loc[0] || null).length || error.code !== "VALIDATION") {
            toast(error.message, "error");
            name.focus();
          }
        } finally {
          renameButton.disabled = false;
        }
      },
    },
    h("div.inline-field", field("Name", name).row, renameButton),
  );
  const nameErrors = errorSlots({ name });

  const entriesHeading = h("h2.entries-heading");
  const list = h("ol.lore-entries", { "aria-label": "Entries" });
  const addButton = h(
    "button.add-entry",
    {
      type: "button",
      onclick: () => {
        if (!mayLeave()) return;
        st.editing = "new";
        st.focus = { index: "new", selector: "input[name=keys]" };
        render();
      },
    },
    "+ Add entry",
  );

  async function saveEntries(entries, sent) {
    const { lorebook: saved } = await patch(`/lorebooks/${st.book.id}`, sent || { entries });
    st.book = saved;
    return saved;
  }

  function entryCard(entry, index) {
    const number = index + 1;
    const keys = entry.keys.length ? entry.keys.map((k, i) => [i ? ", " : "", h("code", k)]) : h("span.muted", "none");
    return h(
      "li.lore-entry",
      { dataset: { index: String(index), entryId: entry.id } },
      h(
        "div.lore-entry-head",
        h("h3.lore-entry-title", `Entry ${number}`),
        entry.constant ? badge("always included", "info") : badge("by keys"),
        entry.enabled ? null : badge("disabled", "warn"),
        badge(entry.position === "depth" ? `depth ${entry.depth ?? 4}` : POSITION_SHORT[entry.position] || entry.position),
        badge(`order ${num(entry.order)}`),
      ),
      h("p.lore-keys", "Keys: ", keys),
      entry.secondary_keys.length ? h("p.lore-keys", "Also needs one of: ", entry.secondary_keys.map((k, i) => [i ? ", " : "", h("code", k)])) : null,
      h("p.lore-content.pre", entry.content ? shorten(entry.content, 400) : h("em", "(no text)")),
      h(
        "div.actions",
        h(
          "button.small.edit-entry",
          {
            type: "button",
            "aria-label": `Edit entry ${number}`,
            onclick: () => {
              if (!mayLeave()) return;
              st.editing = index;
              st.focus = { index, selector: "input[name=keys]" };
              render();
            },
          },
          "Edit",
        ),
        h("button.small.danger-outline.remove-entry", { type: "button", "aria-label": `Remove entry ${number}`, onclick: () => removeEntry(index) }, "Remove"),
      ),
    );
  }

  function entryForm(entry, index) {
    const isNew = index === "new";
    const number = isNew ? st.book.entries.length + 1 : index + 1;
    const keys = h("input", { type: "text", name: "keys", value: (entry?.keys || []).join(", "), autocomplete: "off", placeholder: "dragon, Vermax" });
    const secondary = h("input", { type: "text", name: "secondary_keys", value: (entry?.secondary_keys || []).join(", "), autocomplete: "off" });
    const content = h("textarea", { name: "content", rows: 4, value: entry?.content || "" });
    const constant = checkbox("Always include (constant): no key needed, never dropped", { name: "constant", checked: Boolean(entry?.constant) });
    const enabled = checkbox("Enabled", { name: "enabled", checked: entry ? entry.enabled : true });
    const order = h("input", { type: "number", name: "order", step: 1, min: -1000000, max: 1000000, value: entry?.order ?? 100, inputmode: "numeric" });
    const position = select(POSITIONS, entry?.position || "before", { name: "position" });
    const depth = h("input", { type: "number", name: "depth", step: 1, min: 0, max: 10000, value: entry?.depth ?? 4, inputmode: "numeric" });
    const depthField = field("Depth (messages from the end of the history)", depth);
    const syncDepth = () => (depthField.row.hidden = position.value !== "depth");
    position.addEventListener("change", syncDepth);
    syncDepth();
    const save = h("button.primary.small", { type: "submit" }, isNew ? "Add entry" : "Save entry");
    const cancel = () => {
      st.editing = null;
      st.focus = isNew ? { add: true } : { index, selector: ".edit-entry" };
      render();
    };
    const form = h(
      "form.lore-entry-form",
      {
        "aria-label": isNew ? "New entry" : `Entry ${number}`,
        novalidate: true,
        oninput: () => (st.dirty = true),
        onchange: () => (st.dirty = true),
        onkeydown: (event) => {
          if (event.key === "Escape") {
            event.preventDefault();
            event.stopPropagation();
            cancel();
          }
        },
        onsubmit: async (event) => {
          event.preventDefault();
          slots.clear();
          const edited = {
            keys: splitKeys(keys.value),
            secondary_keys: splitKeys(secondary.value),
            content: content.value,
            constant: constant.input.checked,
            enabled: enabled.input.checked,
            order: numberOrNull(order.value),
            position: position.value,
            depth: position.value === "depth" ? numberOrNull(depth.value) : entry?.depth ?? null,
          };
          const entries = st.book.entries.map(entryIn);
          const at = isNew ? entries.length : index;
          entries[at] = edited;
          const body = { entries };
          save.disabled = true;
          try {
            await saveEntries(entries, body);
            st.editing = null;
            st.focus = { index: at, selector: ".edit-entry" };
            say(isNew ? `Entry ${at + 1} added.` : `Entry ${at + 1} saved.`);
            render();
          } catch (error) {
            save.disabled = false;
            const problems = problemsOf(error, body);
            const mine = problems.filter((p) => p.loc[0] === "entries" && p.loc[1] === String(at));
            const left = slots.apply(mine, (loc) => (loc.length >= 3 ? loc[2] : null));
            if (left.length || mine.length < problems.length || !(error instanceof ApiError) || error.code !== "VALIDATION") {
              toast(error.message, "error");
              if (!mine.length) keys.focus();
            }
          }
        },
      },
      h("h3.lore-entry-title", isNew ? "New entry" : `Entry ${number}`),
      field("Keys (comma-separated)", keys, "The entry goes into the prompt when one of these words appears in the input or the recent messages.").row,
      field("Secondary keys (comma-separated, optional)", secondary, "If given, one of these must appear too.").row,
      field("Text", content).row,
      h("div.check-row", constant.row, enabled.row),
      h(
        "div.field-pair",
        field("Order", order, "Lower comes first; between −1,000,000 and 1,000,000.").row,
        field("Position", position, "Before: after the system prompt and persona. After: just before the input. Inside: a number of messages from the end.").row,
      ),
      depthField.row,
      h("div.actions", save, h("button.small", { type: "button", onclick: cancel }, "Cancel")),
    );
    const slots = errorSlots({ keys, secondary_keys: secondary, content, constant: constant.input, enabled: enabled.input, order, position, depth });
    return h("li.lore-entry.editing", { dataset: { index: String(index) } }, form);
  }

  async function removeEntry(index) {
    if (!mayLeave()) return; // an open form is closed by the removal
    const entry = st.book.entries[index];
    const what = entry.keys.length ? `(keys: ${entry.keys.join(", ")})` : `“${shorten(entry.content, 60)}”`;
    if (!window.confirm(`Remove entry ${index + 1} ${what} from this lorebook?`)) return;
    const entries = st.book.entries.map(entryIn).filter((_, i) => i !== index);
    try {
      await saveEntries(entries);
      st.editing = null;
      // focus: the entry that took its place, else the one before, else "Add entry"
      const next = entries.length ? Math.min(index, entries.length - 1) : null;
      st.focus = next === null ? { add: true } : { index: next, selector: ".edit-entry" };
      say(`Entry ${index + 1} removed.`);
      render();
    } catch (error) {
      toast(error.message, "error");
    }
  }

  async function deleteBook() {
    const bots = usedBy(store, st.book);
    const note = bots.length ? ` ${bots.length === 1 ? "One bot uses" : `${bots.length} bots use`} it; they will go on without it.` : "";
    if (!window.confirm(`Delete the lorebook “${st.book.name}” and its ${st.book.entries.length} entries?${note}`)) return;
    try {
      await del(`/lorebooks/${st.book.id}`);
      toast(`Lorebook “${st.book.name}” deleted.`);
      go("#/lorebooks");
    } catch (error) {
      toast(error.message, "error");
    }
  }

  function render() {
    st.dirty = false; // a form is made afresh from what is stored
    const entries = st.book.entries;
    entriesHeading.textContent = `Entries (${entries.length})`;
    const items = entries.map((entry, i) => (st.editing === i ? entryForm(entry, i) : entryCard(entry, i)));
    if (st.editing === "new") items.push(entryForm(null, "new"));
    replace(list, items);
    addButton.hidden = st.editing === "new";
    const want = st.focus;
    st.focus = null;
    if (want?.add) addButton.focus();
    else if (want) list.querySelector(`.lore-entry[data-index="${want.index}"] ${want.selector}`)?.focus();
  }

  const bots = usedBy(store, lorebook);
  replace(
    main,
    h(
      "section.page.lorebook-page",
      { dataset: { lorebookId: lorebook.id } },
      h("p.breadcrumb", h("a", { href: "#/lorebooks" }, "← All lorebooks")),
      h("div.page-head", heading, h("div.actions", h("button.danger-outline", { type: "button", onclick: deleteBook }, "Delete lorebook"))),
      h(
        "p.muted",
        bots.length
          ? ["Used by ", bots.map((b, i) => [i ? ", " : "", h("a", { href: `#/bot/${b.id}` }, b.name)]), "."]
          : "Not used by a bot yet: pick it in a bot's settings.",
      ),
      nameForm,
      entriesHeading,
      h(
        "p.help",
        "Entries are sorted by order in the prompt. A keyed entry needs one of its keys in the input or the recent messages; the prompt view of a chat shows which entries were sent and why.",
      ),
      list,
      h("div.actions", addButton),
      status,
    ),
  );
  render();
  if (!lorebook.entries.length) addButton.focus();
}
