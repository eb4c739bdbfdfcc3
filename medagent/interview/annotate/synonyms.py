"""Supplementary surface forms of the annotators' vocabulary (step 3 and 4 of ``vocab``).

Lay phrasings patients and physicians use in history taking, written from general clinical vocabulary and
checked against the three public gold MediTOD dialogues (so scores on those dialogues are in-sample).
Canonical names are MediTOD's released names where the public sample attests them, else the labelling
ontology's codes, else a UMLS-style preferred name. Each table maps a canonical name to ``|``-separated
surface forms; a *block* string lists phrases consumed without a finding.
"""

from __future__ import annotations

# canonical -> "|"-separated surface forms (overrides the ontology for the same surface).
SYMPTOM_SYNONYMS: dict[str, str] = {
    "coughing": "cough|coughs|coughing|coughed|hacking cough|dry cough|barking cough|barky cough",
    "colored/excess sputum": "sputum|phlegm|mucus|gunk|bringing up stuff",
    "hemoptysis": "blood|bloody|coughing up blood|cough up blood|coughed up blood|coughing blood|"
    "blood in your sputum|blood in the sputum|blood in my sputum|bloody sputum|blood tinged|"
    "streaks of blood|hemoptysis|haemoptysis",
    "rectal bleeding": "blood in your stool|blood in the stool|blood in my stool|bloody stools",
    "dyspnea": "shortness of breath|short of breath|breathless|breathlessness|difficulty breathing|"
    "trouble breathing|hard to breathe|hard time breathing|out of breath|catch my breath|catch your breath|"
    "catching my breath|catching your breath|breathing difficulties|breathing problems|dyspnea|dyspnoea|"
    "winded|can't breathe|cannot breathe|couldn't breathe|difficult to breathe|problems breathing",
    "sleep dyspnea": "orthopnea|orthopnoea|paroxysmal nocturnal dyspnea|wake up short of breath|"
    "waking up short of breath|woken up short of breath",
    "wheezing": "wheeze|wheezes|wheezing|wheezy|wheeziness|whistling",
    "fever": "fever|fevers|feverish|febrile|high temperature|felt hot|feeling hot|pyrexia",
    "chills": "chills|chill|shivering|shivers|rigors|shaking chills",
    "night sweats": "night sweats|sweating at night|sweats|night sweating|drenching sweats",
    "bedridden": "fatigue|fatigued|tired|tiredness|exhausted|exhaustion|lethargic|lethargy|low energy|"
    "no energy|lack of energy|less energy",
    "unexplained weight loss": "weight loss|lost weight|losing weight|lose weight|lost any weight|"
    "weight changes|changes in weight|change in weight|changes in your weight|unexplained weight loss",
    "weight gain": "weight gain|gained weight|gaining weight|put on weight",
    "loss of appetite": "loss of appetite|decreased appetite|poor appetite|no appetite|appetite changes|"
    "change in appetite|changes in appetite|changes in your appetite|appetite",
    "chest pain": "chest pain|chest pains|pain in my chest|pain in your chest|pain in the chest|"
    "chest discomfort|chest tightness|tightness in my chest|tightness in your chest|tight chest|"
    "chest pressure|pressure in my chest|chest hurts|chest tight",
    "chest pain at rest": "chest pain at rest",
    "palpitations": "palpitations|palpitation|heart racing|heart's racing|heart is racing|heart was racing|"
    "heart has been racing|racing heart|heart pounding|pounding heart|heart beating fast|fluttering|"
    "skipped beats|skipping beats|irregular heartbeat",
    "presyncope": "lightheaded|light headed|lightheadedness|light headedness|feel faint|feeling faint|"
    "felt faint|going to pass out|gonna pass out|about to pass out|near fainting|presyncope|woozy",
    "syncope": "fainting|fainted|fainting spells|passed out|pass out|passing out|blacked out|blackouts|"
    "lost consciousness|loss of consciousness|syncope",
    "dizziness": "dizzy|dizziness|vertigo|room spinning",
    "pharyngitis": "sore throat|throat pain|throat is sore|scratchy throat|throat hurts|pharyngitis",
    "rhinorrhea": "runny nose|running nose|nose running|rhinorrhea|rhinorrhoea|runny|drippy nose|"
    "nasal discharge",
    "nasal congestion": "stuffy nose|stuffy|stuffed up|blocked nose|congested|congestion|nasal congestion|"
    "sinus congestion|sinus pressure|plugged nose",
    "headache": "headache|headaches|head ache|head hurts|head pain",
    "pain": "pain|pains|painful|aches|ache|achy|aching|hurts|sore|soreness|abdominal pain|stomach pain|"
    "stomach ache|stomachache|tummy ache|belly pain|muscle aches|muscle ache|muscle pain|body aches|"
    "body ache|joint pain|joint aches|back pain|calf pain|leg pain|myalgia|myalgias|arthralgia",
    "difficulty passing urine": "urinary problems|urinary symptoms|urinary|urine|urination|urinating|"
    "peeing|pee|pain with urination|burning with urination|dysuria|difficulty passing urine|trouble peeing",
    "change in faeces/bowel movements": "bowel problems|bowel habits|bowel movements|bowel movement|bowels|"
    "bowel|stool|stools|poop|pooping",
    "diarrhoea": "diarrhea|diarrhoea|loose stools|watery stools",
    "constipation": "constipation|constipated",
    "nausea": "nausea|nauseous|nauseated|queasy|sick to my stomach|sick to your stomach",
    "vomiting": "vomiting|vomit|vomited|throwing up|threw up|throw up|puking",
    "dermatologic problem": "rash|skin changes|changes in your skin|changes to your skin|skin problems|"
    "skin lesions|lesions|hives|itchy skin|skin rash|brown patches|skin|skin issues",
    "dysphonia": "hoarse|hoarseness|hoarse voice|voice changes|changes to your voice|change in your voice|"
    "changes in your voice|voice change|losing my voice|lost my voice|lost your voice|dysphonia|raspy voice",
    "visual impairment": "vision|vision changes|vision problems|changes in your vision|blurry vision|"
    "blurred vision|visual changes|eyesight",
    "hearing impairment": "hearing|hearing loss|hearing changes|changes in hearing|changes in your hearing|"
    "trouble hearing|hearing problems",
    "anosmia": "loss of smell|lost my smell|lost your smell|lost sense of smell|loss of sense of smell|"
    "can't smell|cannot smell|couldn't smell|unable to smell|not able to smell|haven't been able to smell|"
    "wasn't able to smell|anosmia|no sense of smell|smell loss",
    "sense of smell altered": "change in smell|changes in smell|change in your smell|changes in your smell|"
    "change in my smell|smell changes|altered smell|sense of smell|smell",
    "ageusia": "loss of taste|lost my taste|lost your taste|lost sense of taste|can't taste|cannot taste|"
    "couldn't taste|unable to taste|not able to taste|wasn't able to taste|wasn't really able to taste|"
    "haven't been able to taste|ageusia|taste loss|no sense of taste",
    "dysgeusia": "change in taste|changes in taste|change in your taste|changes in your taste|"
    "taste changes|altered taste|dysgeusia|taste|sense of taste|metallic taste",
    "swelling": "swelling|swollen|edema|oedema|puffy|puffiness|leg swelling|ankle swelling",
    "confusion": "confusion|confused|disoriented|disorientation",
    "memory impairment": "memory loss|memory problems|memory issues|forgetful|forgetfulness|"
    "trouble remembering|memory impairment|memory changes",
    "neck stiffness": "neck stiffness|stiff neck|neck is stiff|stiffness in your neck|stiffness in the neck",
    "dysphagia": "trouble swallowing|difficulty swallowing|hard to swallow|painful swallowing|dysphagia",
    "convulsion": "convulsion|convulsions|seizure|seizures",
    "paresthesia": "numbness|tingling|pins and needles|paresthesia",
    "eye redness": "red eyes|red eye|eye redness|pink eye|redness in your eyes",
    "watery eyes": "watery eyes|teary eyes|tearing|eyes watering",
    "itching eyes": "itchy eyes|itching eyes|eyes itchy",
    "sneezing": "sneezing|sneeze|sneezes",
    "lymphadenitis": "swollen glands|swollen lymph nodes|lumps in your neck|enlarged lymph nodes",
    "ear problem": "ear pain|earache|ear ache|ear problems",
}
MULTI_SYMPTOM_TERMS: dict[str, tuple[str, ...]] = {
    "productive cough": ("coughing", "colored/excess sputum"),
    "wet cough": ("coughing", "colored/excess sputum"),
    "smell or taste": ("sense of smell altered", "dysgeusia"),
    "taste or smell": ("sense of smell altered", "dysgeusia"),
    "loss of smell or taste": ("anosmia", "ageusia"),
    "loss of taste or smell": ("anosmia", "ageusia"),
    "itchy watery eyes": ("itching eyes", "watery eyes"),
}
SYMPTOM_BLOCKS = (
    "blood pressure|blood work|blood test|blood tests|blood thinner|blood thinners|blood sugar|blood sugars|"
    "blood cells|blood count|blood clot|blood clots|blood vessel|blood vessels|blood type|blood in your urine|"
    "blood in the urine|blood in my urine|pain killer|pain killers|pain medication|pain medications|pain meds|"
    "pain relief|pain reliever|pain relievers|cough syrup|cough syrups|cough drops|cough medicine|"
    "cough suppressant|fever reducer|heart attack|heart attacks|heart disease|heart failure|x ray|x rays|"
    "sputum sample|sputum culture|sputum test|skin test|urine test|urine sample|stool sample|stool test|"
    "hearing aid|hearing aids"
)

DISEASE_SYNONYMS: dict[str, str] = {
    "covid-19 virus disease": "covid|covid 19|coronavirus|sars cov 2|covid infection",
    "chronic obstructive airway disease": "copd|chronic obstructive pulmonary disease|"
    "chronic obstructive pulmonary disorder|chronic obstructive lung disease|"
    "chronic obstructive airway disease|chronic obstructive airways disease",
    "chronic bronchitis": "chronic bronchitis",
    "seborrheic keratosis": "seborrheic keratosis|seborrheic keratoses|seborrhoeic keratosis",
    "asthma": "asthma|reactive airway disease",
    "bronchospasm / acute asthma exacerbation": "asthma exacerbation|asthma attack|asthma flare|"
    "exacerbation of asthma|bronchospasm",
    "bronchitis": "bronchitis|acute bronchitis",
    "pneumonia": "pneumonia|pneumonitis|lung infection|community acquired pneumonia",
    "lower respiratory tract infection": "chest infection|lower respiratory tract infection|"
    "lower respiratory infection",
    "urti": "urti|uri|upper respiratory tract infection|upper respiratory infection|"
    "upper respiratory tract infections",
    "common cold": "common cold|a cold|head cold",
    "congestive heart failure": "chf|congestive heart failure|heart failure",
    "pulmonary embolism": "pe|pulmonary embolism|pulmonary embolus|blood clot in the lungs|"
    "blood clot in your lungs|clot in the lungs|clot in your lungs",
    "malignant neoplasms": "cancer|malignancy|tumor|tumour",
    "pulmonary neoplasm": "lung cancer|lung tumor|lung tumour|lung mass|lung nodule",
    "pulmonary fibrosis": "pulmonary fibrosis|idiopathic pulmonary fibrosis|ipf|lung fibrosis|"
    "interstitial lung disease|ild",
    "infectious mononucleosis": "mono|mononucleosis|infectious mononucleosis|ebv|epstein barr|"
    "epstein barr virus|glandular fever",
    "measles": "measles|rubeola",
    "pertussis": "whooping cough|pertussis",
    "allergic rhinitis": "allergic rhinitis|hay fever|seasonal allergies|allergies",
    "sinusitis": "sinusitis|sinus infection|rhinosinusitis",
    "myocardial infarction": "heart attack|myocardial infarction|mi",
    "angina pectoris": "angina",
    "pulmonary emphysema": "emphysema",
    "pleural effusion": "pleural effusion|fluid around the lungs|fluid around your lungs",
    "acute pulmonary edema": "pulmonary edema|pulmonary oedema|fluid in the lungs|fluid in your lungs",
    "hypersensitivity pneumonitis": "hypersensitivity pneumonitis|bird fancier's lung|farmer's lung",
    "occupational asthma": "occupational asthma|work related asthma",
    "gerd": "gerd|acid reflux|reflux|heartburn|gastroesophageal reflux disease",
    "costochondritis": "costochondritis",
    "anxiety": "anxiety|anxiety attack",
    "panic attack": "panic attack|panic attacks",
    "streptococcal pharyngitis": "strep throat|strep|streptococcal pharyngitis",
    "tonsillitis": "tonsillitis",
    "acute otitis media": "ear infection|otitis media",
    "acute laryngitis": "laryngitis",
    "respiratory syncytial virus infection": "rsv|respiratory syncytial virus",
    "cystic fibrosis": "cystic fibrosis",
    "lung abscess": "lung abscess",
    "atrial fibrillation": "atrial fibrillation|afib|a fib",
    "deep vein thrombosis": "dvt|deep vein thrombosis",
    "sleep apnea": "sleep apnea|sleep apnoea|obstructive sleep apnea|osa",
    "lymphoma": "lymphoma",
    "mesothelioma": "mesothelioma",
    "pneumoconiosis": "silicosis|asbestosis|pneumoconiosis|black lung",
    "foreign body aspiration": "foreign body aspiration|aspirated",
    "vocal cord dysfunction": "vocal cord dysfunction",
}
DISEASE_BLOCKS = (
    "flu shot|flu shots|flu vaccine|flu vaccines|flu like|pneumonia vaccine|pneumonia shot|covid vaccine|"
    "covid vaccines|covid shot|cancer screening|during covid|because of covid|since covid|covid pandemic|"
    "covid restrictions|covid times|covid protocols|covid precautions|pandemic"
)
