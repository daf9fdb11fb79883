// Every unit test reads the vocabulary the backend serves, from a fixture, as the page
// does after its first request.
import { installVocabulary, parseVocabulary } from "../src/vocabulary";
import fixture from "./fixtures/vocabulary.json";

installVocabulary(parseVocabulary(fixture));
