// Export and import of chats (issue 27): the chat view's Export menu (JSON, lossless; Markdown, to read) and the
// chat list's Import form (a file from contextshift, SillyTavern .jsonl, ChatGPT or Open WebUI conversations.json).

import { ApiError, BASE, post } from "./api.js";
import { field, h, replace, select, toast } from "./dom.js";

const FORMATS = [
  ["json", "JSON (everything, to import again)", "json"],
  ["markdown", "Markdown (to read)", "md"],
];

function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function exportChat(chat, format, extension) {
  const response = await fetch(`${BASE}/chats/${encodeURIComponent(chat.id)}/export?format=${format}`, {
    headers: { Accept: format === "json" ? "application/json" : "text/markdown" },
  });
  if (!response.ok) throw new ApiError(response.status, `HTTP_${response.status}`, "The export failed.");
  const safe = (chat.title || "chat").replace(/[^\p{L}\p{N} _-]+/gu, "").trim().slice(0, 60) || "chat";
  download(await response.blob(), `${safe}.${extension}`);
}

/** The chat view's Export menu: a disclosure with one button a format. */
export function exportMenu(chat) {
  const menu = h(
    "details.export-menu",
    h("summary.button.export-toggle", { "aria-label": "Export this chat" }, "Export"),
    h(
      "div.export-options",
      { role: "group", "aria-label": "Export formats" },
      FORMATS.map(([format, label, extension]) =>
        h(
          "button.export-option",
          {
            type: "button",
            dataset: { export: format },
            onclick: async (event) => {
              const button = event.currentTarget;
              button.disabled = true;
              try {
                await exportChat(chat, format, extension);
                menu.open = false;
              } catch (error) {
                toast(`Export failed: ${error.message}`, "error");
              } finally {
                button.disabled = false;
              }
            },
          },
          label,
        ),
      ),
    ),
  );
  return menu;
}

/** The chat list's Import form: which bot the chats talk to, the file; on success it opens the first chat. */
export function importForm({ store, go }) {
  const bots = store.bots.map((b) => [b.id, b.name]);
  const botSelect = select(bots, bots[0]?.[0], { id: "import-bot" });
  const file = h("input#import-file", { type: "file", accept: ".json,.jsonl,application/json", required: true });
  const status = h("p.import-status", { role: "status", "aria-live": "polite" });
  const submit = h("button.primary", { type: "submit" }, "Import");
  async function run(event) {
    event.preventDefault();
    const chosen = file.files?.[0];
    if (!chosen) return replace(status, "Choose a file first.");
    submit.disabled = true;
    replace(status, `Reading ${chosen.name}…`);
    try {
      const content = await chosen.text();
      const done = await post("/chat-imports", { bot_id: botSelect.value, content, filename: chosen.name });
      const count = done.chats.length;
      replace(status, `Imported ${count} chat${count === 1 ? "" : "s"} (${done.messages} message${done.messages === 1 ? "" : "s"}).`);
      toast(`Imported ${count} chat${count === 1 ? "" : "s"} from ${chosen.name}.`);
      await store.refresh();
      go(`#/chat/${done.chats[0].id}`);
    } catch (error) {
      status.classList.add("error-text");
      replace(status, `Import failed: ${error.message}${error.code ? ` (${error.code})` : ""}`);
    } finally {
      submit.disabled = false;
    }
    return null;
  }
  return h(
    "form.import-form",
    { "aria-labelledby": "import-heading", onsubmit: run },
    h("h2#import-heading", "Import chats"),
    h("p.muted", "A contextshift export (.json), a SillyTavern chat (.jsonl), or a ChatGPT or Open WebUI export (conversations.json). Each conversation becomes a new chat."),
    field("Bot", botSelect).row,
    field("File", file).row,
    h("div.actions", submit),
    status,
  );
}
